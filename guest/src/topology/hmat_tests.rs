//! Host tests of the HMAT and SRAT parsers: tables built here byte by byte
//! as the ACPI specification lays them out, and tables recorded from the
//! `socket2` topology's guest (`od -An -v -tx1 /sys/firmware/acpi/tables/X`).

use super::*;
use proptest::prelude::*;

/// An ACPI table: header with `sig`, `revision`, the checksum fixed up,
/// then `reserved` zero bytes and `body`.
fn table(sig: &[u8; 4], revision: u8, reserved: usize, body: &[u8]) -> Vec<u8> {
    let mut t = vec![0u8; ACPI_HEADER + reserved];
    t[..4].copy_from_slice(sig);
    t[8] = revision;
    t.extend_from_slice(body);
    let len = t.len() as u32;
    t[4..8].copy_from_slice(&len.to_le_bytes());
    let sum = t.iter().fold(0u8, |s, &x| s.wrapping_add(x));
    t[9] = 0u8.wrapping_sub(sum);
    t
}

/// A locality structure (type 1) of `data_type` over `inits` x `targets`.
fn locality(data_type: u8, inits: &[u32], targets: &[u32], base: u64, entries: &[u16]) -> Vec<u8> {
    let mut s = Vec::new();
    s.extend_from_slice(&1u16.to_le_bytes());
    s.extend_from_slice(&[0, 0]);
    let len = 32 + 4 * (inits.len() + targets.len()) + 2 * entries.len();
    s.extend_from_slice(&(len as u32).to_le_bytes());
    s.extend_from_slice(&[0, data_type, 0, 0]);
    s.extend_from_slice(&(inits.len() as u32).to_le_bytes());
    s.extend_from_slice(&(targets.len() as u32).to_le_bytes());
    s.extend_from_slice(&[0; 4]);
    s.extend_from_slice(&base.to_le_bytes());
    for x in inits.iter().chain(targets) {
        s.extend_from_slice(&x.to_le_bytes());
    }
    for e in entries {
        s.extend_from_slice(&e.to_le_bytes());
    }
    s
}

/// A Memory Proximity Domain Attributes structure (type 0).
fn domain(initiator: Option<u32>, memory: u32) -> Vec<u8> {
    let mut s = vec![0u8; 40];
    s[4..8].copy_from_slice(&40u32.to_le_bytes());
    s[8] = u8::from(initiator.is_some());
    s[12..16].copy_from_slice(&initiator.unwrap_or(0).to_le_bytes());
    s[16..20].copy_from_slice(&memory.to_le_bytes());
    s
}

/// The `socket2` figures: initiators 0, 1; targets 0..4; bandwidth GB/s.
fn socket2_hmat() -> Vec<u8> {
    let bw: [u16; 8] = [300, 150, 100, 50, 150, 300, 50, 100];
    let lat: [u16; 8] = [100, 150, 250, 300, 150, 100, 300, 250];
    let mut body = Vec::new();
    for m in 0..4 {
        body.extend(domain(Some(m % 2), m));
    }
    body.extend(locality(ACCESS_LATENCY, &[0, 1], &[0, 1, 2, 3], 1000, &lat));
    body.extend(locality(
        ACCESS_BANDWIDTH,
        &[0, 1],
        &[0, 1, 2, 3],
        1000,
        &bw,
    ));
    table(b"HMAT", 2, 4, &body)
}

#[test]
fn built_table() {
    let h = Hmat::parse(&socket2_hmat()).unwrap();
    assert_eq!(h.revision, 2);
    assert_eq!(h.domains.len(), 4);
    assert_eq!(
        h.domains[3],
        DomainAttrs {
            memory: 3,
            initiator: Some(1)
        }
    );
    assert_eq!(h.initiators(), vec![0, 1]);
    assert_eq!(h.bandwidth(0, 0), Some((300_000, 300_000)));
    assert_eq!(h.bandwidth(0, 3), Some((50_000, 50_000)));
    assert_eq!(h.bandwidth(1, 2), Some((50_000, 50_000)));
    assert_eq!(h.bandwidth(2, 0), None);
    // Revision 2 latency is in picoseconds: 100 * 1000 ps = 100 ns.
    assert_eq!(h.figure(0, 0, ACCESS_LATENCY), Some(100));
}

#[test]
fn read_and_write_figures() {
    let mut body = locality(READ_BANDWIDTH, &[0], &[1], 1, &[200]);
    body.extend(locality(WRITE_BANDWIDTH, &[0], &[1], 1, &[100]));
    body.extend(locality(ACCESS_BANDWIDTH, &[0], &[2], 1, &[0xffff]));
    let h = Hmat::parse(&table(b"HMAT", 2, 4, &body)).unwrap();
    assert_eq!(h.bandwidth(0, 1), Some((200, 100)));
    // 0xffff: unreachable, no figure.
    assert_eq!(h.bandwidth(0, 2), None);
    // Revision 1 counts in tenths and drops figures under 10.
    let h = Hmat::parse(&table(b"HMAT", 1, 4, &body)).unwrap();
    assert_eq!(h.bandwidth(0, 1), Some((20, 10)));
    assert_eq!(h.normalize(9, 1, READ_BANDWIDTH), 0);
}

#[test]
fn refusals() {
    let good = socket2_hmat();
    let mut bad_sum = good.clone();
    bad_sum[50] ^= 1;
    assert!(Hmat::parse(&bad_sum).unwrap_err().0.contains("checksum"));
    assert!(Hmat::parse(&good[..30]).is_err());
    assert!(Hmat::parse(&table(b"SRAT", 2, 4, &[])).is_err());
    // A locality structure whose matrix runs past its length.
    let mut l = locality(ACCESS_BANDWIDTH, &[0], &[0], 1, &[1]);
    l[12] = 200;
    assert!(Hmat::parse(&table(b"HMAT", 2, 4, &l))
        .unwrap_err()
        .0
        .contains("entries need"));
    // A structure whose length is shorter than its header.
    let mut d = domain(None, 0);
    d[4..8].copy_from_slice(&4u32.to_le_bytes());
    assert!(Hmat::parse(&table(b"HMAT", 2, 4, &d)).is_err());
}

#[test]
fn srat_entries() {
    let mut body = Vec::new();
    // Local APIC affinity: domain 0x01000002, APIC 5, enabled.
    body.extend([0, 16, 2, 5, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]);
    // The same, disabled.
    body.extend([0, 16, 3, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    // Memory affinity: domain 3, 1 GiB at 4 GiB, enabled.
    let mut m = vec![0u8; 40];
    m[0] = 1;
    m[1] = 40;
    m[2..6].copy_from_slice(&3u32.to_le_bytes());
    m[8..16].copy_from_slice(&(4u64 << 30).to_le_bytes());
    m[16..24].copy_from_slice(&(1u64 << 30).to_le_bytes());
    m[28] = 1;
    body.extend(&m);
    // x2APIC affinity: domain 7, x2APIC id 300, enabled.
    let mut x = vec![0u8; 24];
    x[0] = 2;
    x[1] = 24;
    x[4..8].copy_from_slice(&7u32.to_le_bytes());
    x[8..12].copy_from_slice(&300u32.to_le_bytes());
    x[12] = 1;
    body.extend(&x);
    let s = Srat::parse(&table(b"SRAT", 3, 12, &body)).unwrap();
    assert_eq!(s.cpus, vec![(0x0100_0002, 5), (7, 300)]);
    assert_eq!(s.memory, vec![(3, 4 << 30, 1 << 30)]);
    // A structure of length 0 would loop forever: refused.
    assert!(Srat::parse(&table(b"SRAT", 3, 12, &[1, 0])).is_err());
}

proptest! {
    /// Any matrix, base unit and revision: every pair's figure is the
    /// kernel's normalization of its entry.
    #[test]
    fn matrices_round_trip(
        ni in 1usize..5,
        nt in 1usize..7,
        base in prop_oneof![Just(1u64), Just(10), Just(1000), 1u64..1_000_000],
        seed in proptest::collection::vec(any::<u16>(), 36),
        revision in 1u8..3,
        data_type in 0u8..6,
    ) {
        let inits: Vec<u32> = (0..ni as u32).map(|i| i * 3).collect();
        let targets: Vec<u32> = (0..nt as u32).map(|t| t + 100).collect();
        let entries: Vec<u16> = seed[..ni * nt].to_vec();
        let body = locality(data_type, &inits, &targets, base, &entries);
        let h = Hmat::parse(&table(b"HMAT", revision, 4, &body)).unwrap();
        for (i, &ini) in inits.iter().enumerate() {
            for (t, &tgt) in targets.iter().enumerate() {
                let want = h.normalize(entries[i * nt + t], base, data_type);
                prop_assert_eq!(h.figure(ini, tgt, data_type), Some(want).filter(|&v| v != 0));
            }
        }
    }

    /// Arbitrary bytes, and a real table with bytes changed or cut: never
    /// a panic, and any table accepted keeps to its own length.
    #[test]
    fn never_panics(
        junk in proptest::collection::vec(any::<u8>(), 0..200),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
        cut in any::<usize>(),
    ) {
        let _ = Hmat::parse(&junk);
        let _ = Srat::parse(&junk);
        let mut t = socket2_hmat();
        for (at, x) in flips {
            let n = t.len();
            t[at % n] ^= x;
        }
        let n = t.len();
        t.truncate(cut % (n + 1));
        let _ = Hmat::parse(&t);
        // With the checksum fixed again, lengths alone must be checked.
        if t.len() > ACPI_HEADER {
            t[..4].copy_from_slice(b"HMAT");
            let len = (t.len() as u32).to_le_bytes();
            t[4..8].copy_from_slice(&len);
            t[9] = 0;
            let sum = t.iter().fold(0u8, |s, &x| s.wrapping_add(x));
            t[9] = 0u8.wrapping_sub(sum);
            let _ = Hmat::parse(&t);
        }
    }
}

/// `socket2`'s HMAT, recorded in its guest (`-numa hmat-lb` local 300/100
/// GB/s, remote 150/50, as `xtask/src/plan/topology` asks), as hex rows.
const SOCKET2_HMAT: &[&str] = &[
    "484d415458010000027e424f4348532042585043202020200100000042585043",
    "0100000000000000000000002800000001000000000000000000000000000000",
    "0000000000000000000000000000000000000000280000000100000001000000",
    "0100000000000000000000000000000000000000000000000000000028000000",
    "0100000000000000020000000000000000000000000000000000000000000000",
    "0000000028000000010000000100000003000000000000000000000000000000",
    "0000000000000000010000004800000000000000020000000400000000000000",
    "1027000000000000000000000100000000000000010000000200000003000000",
    "0a000f0019001e000f000a001e00190001000000480000000003000002000000",
    "0400000000000000000800000000000000000000010000000000000001000000",
    "020000000300000096004b00320019004b00960019003200",
];

/// `socket2`'s SRAT, recorded with the HMAT above.
const SOCKET2_SRAT: &[&str] = &[
    "53524154400100000166424f4348532042585043202020200100000042585043",
    "0100000001000000000000000000000000100000010000000000000000000000",
    "0010010101000000000000000000000001280000000000000000000000000000",
    "00000a0000000000000000000100000000000000000000000128000000000000",
    "00001000000000000000f07f0000000000000000010000000000000000000000",
    "0128010000000000000000000100000000000080000000000000000001000000",
    "0000000000000000012802000000000000000080010000000000008000000000",
    "0000000001000000000000000000000001280300000000000000000002000000",
    "0000008000000000000000000100000000000000000000000128000000000000",
    "0000000000000000000000000000000000000000000000000000000000000000",
];

fn unhex(rows: &[&str]) -> Vec<u8> {
    let s: String = rows.concat();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn recorded_socket2_tables() {
    let h = Hmat::parse(&unhex(SOCKET2_HMAT)).unwrap();
    assert_eq!(h.revision, 2);
    assert_eq!(
        h.domains,
        (0..4)
            .map(|m| DomainAttrs {
                memory: m,
                initiator: Some(m % 2)
            })
            .collect::<Vec<_>>()
    );
    // QEMU counts 1G as GiB: 300 GiB/s = 307200 MB/s (150 x base 2048).
    let gib = |g: u32| Some((g * 1024, g * 1024));
    assert_eq!(
        [0, 1, 2, 3].map(|t| h.bandwidth(0, t)),
        [gib(300), gib(150), gib(100), gib(50)]
    );
    assert_eq!(
        [0, 1, 2, 3].map(|t| h.bandwidth(1, t)),
        [gib(150), gib(300), gib(50), gib(100)]
    );
    assert_eq!(h.figure(0, 2, ACCESS_LATENCY), Some(250));
    assert_eq!(h.initiators(), vec![0, 1]);
    let s = Srat::parse(&unhex(SOCKET2_SRAT)).unwrap();
    assert_eq!(s.cpus, vec![(0, 0), (1, 1)]);
    let domains: Vec<u32> = s.memory.iter().map(|m| m.0).collect();
    assert_eq!(domains, vec![0, 0, 1, 2, 3], "{:x?}", s.memory);
}

/// The recorded SRAT's domains land on the nodes the guest's memory blocks
/// showed (128 MiB blocks: node 0 below 4 GiB, then 16 blocks each for
/// nodes 1, 2 and 3).
#[test]
fn recorded_domains_to_nodes() {
    let s = Srat::parse(&unhex(SOCKET2_SRAT)).unwrap();
    let block = |b: u64| match b {
        0..=31 => Some(0),
        32..=79 => Some(((b - 32) / 16 + 1) as u32),
        _ => None,
    };
    let m = crate::topology::sockets::domain_nodes(&s, 1 << 27, block, |_| None);
    assert_eq!(
        m,
        [(0, 0), (1, 1), (2, 2), (3, 3)].into(),
        "{:x?}",
        s.memory
    );
}
