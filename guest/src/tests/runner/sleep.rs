//! The logic of `tk-test-runner-sleep`; what it checks and how it is used are the doc of
//! `src/bin/tk-test-runner-sleep.rs` (its `--help`).

pub fn main() {
    println!("# tk-test-runner-sleep: printed before the deadline; sleeping for an hour");
    std::thread::sleep(std::time::Duration::from_secs(3600));
    println!("# tk-test-runner-sleep: woke up: the runner did not kill it");
}
