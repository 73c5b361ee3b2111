//! `/etc/tierkit/cmd` ([`crate::param::files::CMD`]): what `cargo xtask run
//! -- CMD` and `cargo xtask shell` hand to /init besides `tierkit.mode=cmd`
//! or `shell`: the host's working directory (shared over virtio-9p and
//! mounted at the same path), the terminal, and for `run` the command.
//!
//! Format: NUL-terminated fields `KEY=VALUE`, where `VALUE` is any bytes
//! but NUL (so every argument passes as it is): `cwd=`, `term=`, `rows=`
//! and `cols=` (both or neither), then one `arg=` per word of the command;
//! `cmd=` (empty) comes before the words when there is a command at all.

/// The contents of the command file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CmdFile {
    /// The host's working directory: the mount point of the share, and
    /// where the command or the shell starts.
    pub cwd: Vec<u8>,
    /// `TERM` for the shell.
    pub term: Vec<u8>,
    /// The terminal's size (`None`: unknown).
    pub size: Option<(u16, u16)>,
    /// `run -- CMD`: the command's words; `None` for `shell`.
    pub argv: Option<Vec<Vec<u8>>>,
}

/// A malformed command file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadCmdFile(pub String);

impl std::fmt::Display for BadCmdFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed command file: {}", self.0)
    }
}

impl std::error::Error for BadCmdFile {}

impl CmdFile {
    /// The file's bytes; `None` if a value holds a NUL.
    pub fn encode(&self) -> Option<Vec<u8>> {
        let mut f = Vec::new();
        let mut field = |k: &str, v: &[u8]| -> Option<()> {
            if v.contains(&0) {
                return None;
            }
            f.extend_from_slice(k.as_bytes());
            f.push(b'=');
            f.extend_from_slice(v);
            f.push(0);
            Some(())
        };
        field("cwd", &self.cwd)?;
        field("term", &self.term)?;
        if let Some((rows, cols)) = self.size {
            field("rows", rows.to_string().as_bytes())?;
            field("cols", cols.to_string().as_bytes())?;
        }
        if let Some(argv) = &self.argv {
            field("cmd", b"")?;
            for a in argv {
                field("arg", a)?;
            }
        }
        Some(f)
    }

    /// Reads the file's bytes back.
    pub fn decode(b: &[u8]) -> Result<CmdFile, BadCmdFile> {
        let Some(body) = b.strip_suffix(&[0]) else {
            return Err(BadCmdFile("not NUL-terminated".into()));
        };
        let mut c = CmdFile::default();
        let (mut rows, mut cols) = (None, None);
        let num = |v: &[u8]| -> Result<u16, BadCmdFile> {
            std::str::from_utf8(v)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| BadCmdFile(format!("bad number {:?}", String::from_utf8_lossy(v))))
        };
        for f in body.split(|&x| x == 0) {
            let Some(eq) = f.iter().position(|&x| x == b'=') else {
                return Err(BadCmdFile(format!(
                    "no `=` in {:?}",
                    String::from_utf8_lossy(f)
                )));
            };
            let (k, v) = (&f[..eq], &f[eq + 1..]);
            match k {
                b"cwd" => c.cwd = v.to_vec(),
                b"term" => c.term = v.to_vec(),
                b"rows" => rows = Some(num(v)?),
                b"cols" => cols = Some(num(v)?),
                b"cmd" => c.argv = Some(Vec::new()),
                b"arg" => match &mut c.argv {
                    Some(a) => a.push(v.to_vec()),
                    None => return Err(BadCmdFile("`arg=` before `cmd=`".into())),
                },
                _ => {
                    return Err(BadCmdFile(format!(
                        "unknown field {:?}",
                        String::from_utf8_lossy(k)
                    )))
                }
            }
        }
        c.size = rows.zip(cols);
        if c.cwd.is_empty() {
            return Err(BadCmdFile("no `cwd=`".into()));
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte but NUL passes as it was.
    #[test]
    fn round_trips() {
        let words: Vec<Vec<u8>> = vec![
            b"printf".to_vec(),
            b"%s\\0".to_vec(),
            b"a b".to_vec(),
            b"it's \"q\" $HOME `x` \\".to_vec(),
            b"".to_vec(),
            b"new\nline\ttab".to_vec(),
            b"\xff\xfe raw".to_vec(),
            b"-- --x=y".to_vec(),
        ];
        let c = CmdFile {
            cwd: b"/w/it's here".to_vec(),
            term: b"xterm-256color".to_vec(),
            size: Some((50, 132)),
            argv: Some(words),
        };
        let b = c.encode().unwrap();
        assert_eq!(CmdFile::decode(&b), Ok(c.clone()));
        let shell = CmdFile {
            size: None,
            argv: None,
            ..c.clone()
        };
        assert_eq!(CmdFile::decode(&shell.encode().unwrap()), Ok(shell));
        let empty_cmd = CmdFile {
            argv: Some(vec![]),
            ..c
        };
        assert_eq!(CmdFile::decode(&empty_cmd.encode().unwrap()), Ok(empty_cmd));
    }

    #[test]
    fn malformed_files_are_refused() {
        let nul = CmdFile {
            cwd: b"/a\0b".to_vec(),
            ..Default::default()
        };
        assert_eq!(nul.encode(), None);
        for bad in [
            &b"cwd=/a"[..],
            b"cwd=/a\0arg=x\0",
            b"cwd=/a\0rows=x\0",
            b"cwd=/a\0what=1\0",
            b"term=x\0",
            b"cwd\0",
        ] {
            assert!(
                CmdFile::decode(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
