//! Which userspace tests a boot runs: `tierkit.filter=` and `tierkit.skip=`
//! hold comma-separated shell globs with `*` and `?`.

/// A shell glob with `*` and `?` against a test name; any other character
/// matches itself.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    fn m(p: &[char], n: &[char]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some('*'), _) => m(&p[1..], n) || (!n.is_empty() && m(p, &n[1..])),
            (Some('?'), Some(_)) => m(&p[1..], &n[1..]),
            (Some(a), Some(b)) if a == b => m(&p[1..], &n[1..]),
            _ => false,
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    m(&p, &n)
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
