//! Which userspace tests a boot runs: `tierkit.filter=` and `tierkit.skip=`
//! hold comma-separated shell globs with `*` and `?`.

/// A shell glob with `*` and `?` against a test name; any other character
/// matches itself.
///
/// Iterative, with one backtrack point (the last `*` seen and where in the
/// name it stands): linear in the pattern times the name, whatever the
/// pattern, so that no command line can make /init or xtask spin.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    // The last `*`'s position in `p`, and the name position it now covers up to.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some('?') => {
                pi += 1;
                ni += 1;
            }
            Some(c) if *c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                // Let the last `*` take one more character and retry.
                Some((sp, sn)) => {
                    star = Some((sp, sn + 1));
                    pi = sp + 1;
                    ni = sn + 1;
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
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
        for p in all(&['a', 'b', '*', '?'], 5) {
            for n in all(&['a', 'b'], 5) {
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
