//! How the report writes a figure, a set of weights, page counts per node
//! and the word a target gets (met, MISSED, n/a).

/// 4.69 M, 3150, 12.5, 0.050: the rows' own number format, so that the
/// report and the guest's tables print a figure alike.
pub use tierkit_protocol::rows::fmt_num as num;

pub(super) fn fmt_w(w: &Option<Vec<(u32, u8)>>) -> String {
    match w {
        None => "-".into(),
        Some(v) => v
            .iter()
            .map(|(n, w)| format!("{n}:{w}"))
            .collect::<Vec<_>>()
            .join(","),
    }
}

pub(super) fn fmt_pages(p: &[(i32, usize)]) -> String {
    p.iter()
        .map(|(n, c)| format!("{n}:{c}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The word a target gets in the report: met, MISSED, or n/a.
pub(super) fn target_word(m: Option<bool>) -> &'static str {
    match m {
        Some(true) => "met",
        Some(false) => "MISSED",
        None => "n/a",
    }
}
