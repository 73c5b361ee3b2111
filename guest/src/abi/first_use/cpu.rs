//! The CPU time a gigantic page costs the whole machine, beside the latency
//! its first fault costs the task.
//!
//! The upstream debate on pre-zeroing hugetlb pages asks for the total
//! real time spent while pages are needed, not the fault latency alone: a
//! pool that clears in the background, or workers that clear in parallel,
//! move the work rather than remove it. So each measurement also reads the
//! busy time of every CPU (`/proc/stat`'s `cpu` line: user, nice, system,
//! irq, softirq and steal; idle and iowait left out) before the child
//! starts and after the system is back where it began: the child gone, its
//! GiB freed, and for the pool the range it took cleared again by the
//! refill thread. The same window around a child that does nothing is the
//! cost of the measurement itself, taken off.
//!
//! The kernel counts that time by ticks (`CONFIG_TICK_CPU_ACCOUNTING`) and
//! `/proc/stat` reports it in USER_HZ (100 per second): each figure is
//! good to about 10 ms per CPU, which the median of several runs narrows.

use std::fs;

/// Busy time of all CPUs since boot, ns; `None` without `/proc/stat`.
pub fn busy_ns() -> Option<u64> {
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = u64::try_from(hz).ok().filter(|&h| h > 0)?;
    parse_busy(&fs::read_to_string("/proc/stat").ok()?, hz)
}

/// The busy time in `/proc/stat`'s aggregate `cpu` line, ns, for `hz`
/// ticks per second: user + nice + system + irq + softirq + steal.
fn parse_busy(stat: &str, hz: u64) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if f.len() < 4 {
        return None;
    }
    // user nice system idle iowait irq softirq steal [guest guest_nice]:
    // guest time is already inside user.
    let ticks: u64 = [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| f.get(i)).sum();
    Some(ticks.saturating_mul(1_000_000_000) / hz)
}

/// What a measurement cost beyond the null child's: `cycle` less `null`
/// and less `own` (CPU time the measured child spends on work that is not
/// the page's, e.g. touching it a second time), never below zero.
pub fn net(cycle: u64, null: u64, own: u64) -> u64 {
    cycle.saturating_sub(null).saturating_sub(own)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_leaves_out_idle_and_iowait() {
        let stat = "cpu  100 5 50 9000 40 3 2 1 0 0\ncpu0 50 2 25 4500 20 1 1 0 0 0\n";
        // 100 + 5 + 50 + 3 + 2 + 1 = 161 ticks at 100 Hz.
        assert_eq!(parse_busy(stat, 100), Some(1_610_000_000));
        assert_eq!(parse_busy("cpu0 1 2 3 4\n", 100), None);
        assert_eq!(parse_busy("cpu  1 x 3 4\n", 100), None);
        assert_eq!(parse_busy("cpu  1 2\n", 100), None);
    }

    #[test]
    fn net_is_never_negative() {
        assert_eq!(net(300, 100, 50), 150);
        assert_eq!(net(100, 150, 0), 0);
        assert_eq!(net(100, 50, 80), 0);
    }
}
