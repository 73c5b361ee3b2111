//! Which tests a boot runs, in the one glob dialect of `--filter`:
//! `tierkit.filter=` and `tierkit.skip=` hold comma-separated globs; xtask
//! matches its own tests and the KUnit suites and cases with the same
//! [`glob_match`] before it boots, and the kernel's `kunit.filter_glob=`
//! matches with the kernel's `glob_match()`, which [`glob_match`] follows.
//!
//! The dialect is the kernel's (lib/glob.c): `*` any run of characters,
//! `?` one character, `[abc]` and `[a-z]` one of a class, `[!abc]` one
//! outside it, `\x` the character `x`; anything else matches itself. A
//! KUnit glob is `suite` or `suite.case` ([`kunit_selects`]).

/// A glob of the kernel's dialect (lib/glob.c `glob_match()`) against a
/// test name.
///
/// Iterative, with one backtrack point (the last `*` seen and where in the
/// name it stands), as the kernel's: linear in the pattern times the name,
/// whatever the pattern, so that no command line can make /init or xtask
/// spin.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    // The last `*`'s position after it in `p`, and the name position it
    // now covers up to.
    let mut star: Option<(usize, usize)> = None;
    loop {
        let c = n.get(ni).copied();
        // How the pattern's next element meets `c`: `Some(next pi)` if it
        // matches, `None` if not (then backtrack).
        let step = match p.get(pi) {
            Some('*') => {
                if pi + 1 == p.len() {
                    return true;
                }
                star = Some((pi + 1, ni));
                pi += 1;
                continue;
            }
            Some('?') => c.map(|_| pi + 1),
            Some('[') => match class(&p, pi + 1) {
                Some((set, next)) => c.filter(|&c| set(c)).map(|_| next),
                None => (c == Some('[')).then_some(pi + 1),
            },
            Some('\\') if pi + 1 < p.len() => (c == Some(p[pi + 1])).then_some(pi + 2),
            Some(&d) => (c == Some(d)).then_some(pi + 1),
            None => {
                if c.is_none() {
                    return true;
                }
                None
            }
        };
        match step {
            Some(next) => {
                pi = next;
                ni += 1;
            }
            None => match star {
                // Let the last `*` take one more character and retry.
                Some((sp, sn)) if sn < n.len() => {
                    star = Some((sp, sn + 1));
                    pi = sp;
                    ni = sn + 1;
                }
                _ => return false,
            },
        }
        if ni > n.len() {
            return false;
        }
    }
}

/// The class that starts at `p[at]` (just after its `[`): its test and
/// the pattern position after its `]`, or `None` if it is not closed (the
/// kernel then reads the `[` as itself). The first member may be `]`.
fn class(p: &[char], at: usize) -> Option<(impl Fn(char) -> bool, usize)> {
    let inverted = p.get(at) == Some(&'!');
    let mut i = at + usize::from(inverted);
    let mut spans = Vec::new();
    loop {
        let a = *p.get(i)?;
        i += 1;
        let mut b = a;
        if p.get(i) == Some(&'-') && p.get(i + 1).is_some_and(|&x| x != ']') {
            b = p[i + 1];
            i += 2;
        }
        spans.push((a, b));
        if p.get(i) == Some(&']') {
            break;
        }
    }
    Some((
        move |c: char| spans.iter().any(|&(a, b)| a <= c && c <= b) != inverted,
        i + 1,
    ))
}

/// Whether the KUnit glob `glob` (`kunit.filter_glob=`) selects the case
/// `case` of the suite `suite`: as KUnit splits it, the part before the
/// first `.` against the suite's name and the rest (none: every case)
/// against the case's.
pub fn kunit_selects(glob: &str, suite: &str, case: &str) -> bool {
    match glob.split_once('.') {
        Some((s, c)) => glob_match(s, suite) && glob_match(c, case),
        None => glob_match(glob, suite),
    }
}

/// `name` matches one of the comma-separated globs of `list`.
pub fn in_globs(list: &str, name: &str) -> bool {
    list.split(',').any(|g| glob_match(g, name))
}

/// Whether /init runs the userspace test `name`: it matches a glob of
/// `filter` (`None`: every test) and none of `skip`.
pub fn selects(filter: Option<&str>, skip: Option<&str>, name: &str) -> bool {
    filter.is_none_or(|f| in_globs(f, name)) && !skip.is_some_and(|s| in_globs(s, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("tk-test-*", "tk-test-vma"));
        assert!(glob_match("tk-test-v?a", "tk-test-vma"));
        assert!(!glob_match("tk-test-v?a", "tk-test-vmaa"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("", "x"));
        assert!(!glob_match("tk-test-cxl", "tk-test-cxl2"));
        assert!(glob_match("tk-*-v*a", "tk-test-vma"));
        assert!(glob_match("*-offline", "tk-test-block-offline"));
        assert!(!glob_match("*-offline", "tk-test-offline-x"));
        assert!(glob_match("**", "x"));
        assert!(glob_match("a*b*c", "aXbYbZc"));
        assert!(!glob_match("a*b*c", "aXbYbZ"));
        assert!(!glob_match("?", ""));
    }

    /// The kernel's classes, ranges, complements and escapes: one dialect
    /// for KUnit's suites, /init's tests and xtask's own.
    #[test]
    fn classes_as_the_kernel_reads_them() {
        assert!(glob_match("tierkit_[!g]*", "tierkit_clear"));
        assert!(!glob_match("tierkit_[!g]*", "tierkit_gigantic"));
        assert!(glob_match("tk-test-[cv]*", "tk-test-vma"));
        assert!(!glob_match("tk-test-[cv]*", "tk-test-diff"));
        assert!(glob_match("tk-test-[a-f]iff", "tk-test-diff"));
        assert!(!glob_match("tk-test-[!a-f]iff", "tk-test-diff"));
        // `]` first is a member; `-` last is itself.
        assert!(glob_match("a[]]b", "a]b"));
        assert!(glob_match("a[x-]b", "a-b"));
        // An unclosed class is a literal `[`.
        assert!(glob_match("a[b", "a[b"));
        assert!(!glob_match("a[b", "ab"));
        assert!(glob_match("a\\*b", "a*b"));
        assert!(!glob_match("a\\*b", "axb"));
        assert!(glob_match("*[0-9]", "x7"));
        assert!(!glob_match("*[0-9]", "x7y"));
    }

    #[test]
    fn kunit_globs_split_at_the_first_dot() {
        assert!(kunit_selects("tierkit_wi*", "tierkit_wi_abi", "any"));
        assert!(kunit_selects("tierkit_topology.*", "tierkit_topology", "x"));
        assert!(kunit_selects(
            "tierkit_clear.*zero*",
            "tierkit_clear",
            "pages_are_zero"
        ));
        assert!(!kunit_selects(
            "tierkit_clear.*zero*",
            "tierkit_clear",
            "node"
        ));
        assert!(!kunit_selects("tk-test-vma", "tierkit_wi_abi", "x"));
    }

    /// A pattern of many stars that cannot match answered at once: the
    /// recursive matcher took about 10^16 steps on this input (40 stars,
    /// then a letter no test name has) and hung /init.
    #[test]
    fn many_stars_answer_at_once() {
        let p = format!("{}Q", "*".repeat(40));
        let t = std::time::Instant::now();
        assert!(!glob_match(&p, "tk-test-block-offline"));
        assert!(glob_match(
            &format!("{}e", "*".repeat(40)),
            "tk-test-block-offline"
        ));
        assert!(t.elapsed() < std::time::Duration::from_millis(100));
    }

    /// The iterative matcher agrees with the plain recursive definition on
    /// every pattern over a small alphabet against every short name.
    #[test]
    fn agrees_with_the_recursive_definition() {
        fn m(p: &[char], n: &[char]) -> bool {
            match (p.first(), n.first()) {
                (None, None) => true,
                (Some('*'), _) => m(&p[1..], n) || (!n.is_empty() && m(p, &n[1..])),
                // `[!a]`: one character but `a`.
                (Some('['), Some(&c)) if p.len() >= 4 && p[1] == '!' && p[3] == ']' => {
                    c != p[2] && m(&p[4..], &n[1..])
                }
                (Some('?'), Some(_)) => m(&p[1..], &n[1..]),
                (Some(a), Some(b)) if a == b => m(&p[1..], &n[1..]),
                _ => false,
            }
        }
        fn all(alphabet: &[char], len: usize) -> Vec<Vec<char>> {
            let mut v = vec![vec![]];
            for l in 1..=len {
                let prev: Vec<Vec<char>> = v.iter().filter(|s| s.len() == l - 1).cloned().collect();
                for s in prev {
                    for c in alphabet {
                        let mut t = s.clone();
                        t.push(*c);
                        v.push(t);
                    }
                }
            }
            v
        }
        // `C` stands for the class `[!a]`.
        for p in all(&['a', 'b', '*', '?', 'C'], 4) {
            let p: Vec<char> = p
                .iter()
                .collect::<String>()
                .replace('C', "[!a]")
                .chars()
                .collect();
            for n in all(&['a', 'b', 'c'], 4) {
                let (ps, ns): (String, String) = (p.iter().collect(), n.iter().collect());
                assert_eq!(glob_match(&ps, &ns), m(&p, &n), "{ps:?} against {ns:?}");
            }
        }
    }

    #[test]
    fn selection() {
        assert!(selects(None, None, "tk-test-vma"));
        assert!(selects(Some("tk-test-cxl,tk-test-v*"), None, "tk-test-vma"));
        assert!(!selects(Some("tk-test-cxl"), None, "tk-test-vma"));
        assert!(!selects(None, Some("tk-test-a,tk-test-vma"), "tk-test-vma"));
        assert!(!selects(Some("*"), Some("*vma"), "tk-test-vma"));
        // An empty list selects nothing and leaves nothing out.
        assert!(!selects(Some(""), None, "tk-test-vma"));
        assert!(selects(None, Some(""), "tk-test-vma"));
    }
}
