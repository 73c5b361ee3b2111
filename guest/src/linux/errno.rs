//! Errno values by name, for the reports' messages, and the check that a
//! call failed with the expected one.

/// `ENOTTY` and friends by name.
pub fn errno_str(e: i32) -> String {
    let name = match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::E2BIG => "E2BIG",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::ENFILE => "ENFILE",
        libc::EMFILE => "EMFILE",
        libc::ENOTTY => "ENOTTY",
        libc::EFBIG => "EFBIG",
        libc::ENOSPC => "ENOSPC",
        libc::ESPIPE => "ESPIPE",
        libc::EROFS => "EROFS",
        libc::EPIPE => "EPIPE",
        libc::ERANGE => "ERANGE",
        libc::ENOSYS => "ENOSYS",
        libc::EOVERFLOW => "EOVERFLOW",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        _ => return format!("errno {e}"),
    };
    name.to_string()
}

/// The errno of an `io::Error`, for messages: its name ([`errno_str`]),
/// or the error's text where it has no errno.
pub fn errno_name(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => errno_str(n),
        None => e.to_string(),
    }
}

/// Checks that `r` failed with `errno`.
pub fn expect_errno<T>(r: std::io::Result<T>, errno: i32) -> Result<(), String> {
    match r {
        Ok(_) => Err(format!(
            "succeeded, expected {}",
            errno_name(&std::io::Error::from_raw_os_error(errno))
        )),
        Err(e) if e.raw_os_error() == Some(errno) => Ok(()),
        Err(e) => Err(format!(
            "failed with {}, expected {}",
            errno_name(&e),
            errno_name(&std::io::Error::from_raw_os_error(errno))
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_checks() {
        assert!(expect_errno::<()>(
            Err(std::io::Error::from_raw_os_error(libc::EINVAL)),
            libc::EINVAL
        )
        .is_ok());
        let e = expect_errno::<()>(Ok(()), libc::EINVAL).unwrap_err();
        assert_eq!(e, "succeeded, expected EINVAL");
        let e = expect_errno::<()>(
            Err(std::io::Error::from_raw_os_error(libc::ENOMEM)),
            libc::EINVAL,
        )
        .unwrap_err();
        assert_eq!(e, "failed with ENOMEM, expected EINVAL");
    }
}
