//! How the report writes a figure, a set of weights, page counts per node
//! and the word a target gets (met, MISSED, n/a).

/// 4.69 M, 3150, 12.5, 0.050.
pub fn num(x: f64) -> String {
    let a = x.abs();
    if a >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 1.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

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
