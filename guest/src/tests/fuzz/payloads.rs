//! Debugfs payloads: weights, `auto` and `bandwidth` texts, valid and
//! not, and random bytes.

use super::*;

/// Whether a payload must be accepted, refused with `EINVAL`, or is not
/// classified (anything but a crash goes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Valid,
    Invalid,
    Unknown,
}

/// A payload for a weight file: kstrtou8(buf, 0) with 1..=255 (kernel
/// `node_store`).
pub fn weight_payload(o: &mut Rng) -> (Vec<u8>, Class) {
    const VALID: &[&str] = &[
        "1", "7", "255", "7\n", "+7", "0x10", "0X1f", "010", "0xff", "0377", "+0x7\n", "13",
        // An empty write returns 0 and changes nothing (sysfs_kf_write()).
        "",
    ];
    const INVALID: &[&str] = &[
        "0",
        "00",
        "256",
        "0x100",
        "0400",
        "-1",
        "-0",
        "abc",
        "\n",
        "7\n\n",
        " 7",
        "7 ",
        "7\t",
        "1.5",
        "08",
        "0x",
        "+",
        "++7",
        "99999999999999999999",
        "18446744073709551616",
        "4294967297",
        "7a",
        "0b1",
        "1e2",
    ];
    match o.weighted(&[40, 40, 20]) {
        0 => (o.pick(VALID).as_bytes().to_vec(), Class::Valid),
        1 => (o.pick(INVALID).as_bytes().to_vec(), Class::Invalid),
        _ => (random_payload(o), Class::Unknown),
    }
}

/// A payload for `auto`: kstrtobool (first character, `on`/`off`).
pub fn auto_payload(o: &mut Rng) -> (Vec<u8>, Class) {
    const VALID: &[&str] = &[
        "true", "false", "1", "0", "y", "n", "Y\n", "N", "on", "off", "t", "F", "tomato", "yes",
        "1000", // An empty write returns 0 and changes nothing (sysfs_kf_write()).
        "",
    ];
    const INVALID: &[&str] = &["maybe", "2", " true", "o", "ox", "-1", "\n", "X"];
    match o.weighted(&[40, 40, 20]) {
        0 => (o.pick(VALID).as_bytes().to_vec(), Class::Valid),
        1 => (o.pick(INVALID).as_bytes().to_vec(), Class::Invalid),
        _ => (random_payload(o), Class::Unknown),
    }
}

/// A payload for `bandwidth`: `NID READ WRITE\n` lines, NID a memory node
/// (valid) or at/after `nr_node_ids` or 64 (invalid). Possible nodes
/// without memory are never named: a bandwidth entry cannot be removed, and
/// the table must be restorable.
pub fn bandwidth_payload(o: &mut Rng, env: &Env) -> (Vec<u8>, Class) {
    let good_line = |o: &mut Rng| -> String {
        let n = *o.pick(&env.mem_nodes);
        let sep = if o.chance(1, 5) { "\t" } else { " " };
        let v = |o: &mut Rng| -> u64 {
            match o.below(4) {
                0 => o.below(1 << 20),
                1 => u64::from(u32::MAX),
                2 => 0,
                _ => o.range(1000, 300_000),
            }
        };
        format!("{n}{sep}{}{sep}{}\n", v(o), v(o))
    };
    let class = o.weighted(&[40, 40, 20]);
    match if class == 0 && !env.bandwidth_ok {
        1
    } else {
        class
    } {
        0 => {
            let k = o.range(1, 3);
            (
                (0..k)
                    .map(|_| good_line(o))
                    .collect::<String>()
                    .into_bytes(),
                Class::Valid,
            )
        }
        1 => {
            let bad = match o.below(10) {
                0 => format!("{} 1 1\n", env.nr_node_ids),
                1 => "64 1 1\n".to_string(),
                2 => "-1 1 1\n".to_string(),
                3 => format!("{} 4294967296 1\n", env.mem_nodes[0]),
                4 => format!("{} 1\n", env.mem_nodes[0]),
                5 => format!("{} 1 2 3\n", env.mem_nodes[0]),
                6 => "x 1 2\n".to_string(),
                7 => format!("{} -5 1\n", env.mem_nodes[0]),
                8 => format!("{} 1 1\n{} 1 1\n", env.mem_nodes[0], 1000),
                _ => format!("{}  abc\n", env.mem_nodes[0]),
            };
            // A malformed line spoils the good ones around it.
            let mut s = String::new();
            if o.bool() {
                s.push_str(&good_line(o));
            }
            s.push_str(&bad);
            (s.into_bytes(), Class::Invalid)
        }
        _ => (random_payload(o), Class::Unknown),
    }
}

/// Random bytes, digits with NULs, long runs, huge numbers.
pub fn random_payload(o: &mut Rng) -> Vec<u8> {
    match o.below(6) {
        0 => {
            let mut v = vec![0u8; o.range(1, 64) as usize];
            o.fill(&mut v);
            v
        }
        1 => {
            let mut v = o.range(1, 255).to_string().into_bytes();
            v.push(0);
            v.extend_from_slice(b"junk");
            v
        }
        2 => vec![b'1'; *o.pick(&[4095, 4096, 4097, 8192, 65536])],
        3 => o.next_u64().to_string().into_bytes(),
        4 => format!("{}", o.next_u64() as i64).into_bytes(),
        _ => {
            let mut v = vec![b' '; o.range(0, 5000) as usize];
            v.push(b'7');
            v
        }
    }
}
