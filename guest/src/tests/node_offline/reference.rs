//! Offlining the node while a page of it is held by a reference.

use super::*;

/// A page that someone else holds a plain reference to (a pipe after
/// `vmsplice(2)`, which takes its pages with FOLL_GET) is not moved: the
/// offline of its block is EBUSY while the pipe holds it, and goes
/// through once the pipe is drained, with the mapping's data intact.
/// Moving it would leave the other holder on the old page (a write through
/// such a reference would be lost). Returns the blocks it left offline.
pub fn offline_with_reference(r: &mut Report, c: u32) -> Vec<u64> {
    const WHAT: &str = "offline of a block under a page a pipe holds (vmsplice)";
    let res = (|| -> Result<(String, Vec<u64>), String> {
        let tk = Tierkit::open().map_err(|e| e.to_string())?;
        tk.set_policy(TK_MODE_INTERLEAVE, 1 << c)
            .map_err(|e| e.to_string())?;
        let m = tk.map(1, 0).map_err(|e| e.to_string())?;
        fill(&m, 0x77);
        let pfn = crate::linux::vma::pagemap_pfn(m.addr())
            .map_err(|e| e.to_string())?
            .ok_or("not present")?;
        let bs = crate::linux::memblock::block_size().map_err(|e| e.to_string())?;
        let block = crate::linux::memblock::block_of_pfn(pfn, bs);
        let p = crate::linux::vma::Pipe::new().map_err(|e| e.to_string())?;
        let iov = libc::iovec {
            iov_base: m.as_ptr() as *mut libc::c_void,
            iov_len: 4096,
        };
        // SAFETY: the pipe takes a reference to our page.
        if unsafe { libc::vmsplice(p.wr, &iov, 1, 0) } != 4096 {
            return Err(format!("vmsplice: {}", std::io::Error::last_os_error()));
        }
        let held = set_block_state(block, "offline", Duration::from_secs(30))
            .map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; 4096];
        // SAFETY: reads into a local buffer.
        unsafe { crate::linux::vma::read_exact_fd(p.rd, buf.as_mut_ptr(), 4096) }
            .map_err(|e| e.to_string())?;
        drop(p);
        let drained = set_block_state(block, "offline", Duration::from_secs(30))
            .map_err(|e| e.to_string())?;
        let left: Vec<u64> = [block]
            .into_iter()
            .filter(|&b| block_state(b).as_deref() != Some("online"))
            .collect();
        if !held.outcome.describe().contains("EBUSY") {
            return Err(format!(
                "memory{block} with the pipe holding the page: {}",
                held.outcome.describe()
            ));
        }
        if !matches!(drained.outcome, Outcome::Done) {
            return Err(format!(
                "memory{block} after the pipe was drained: {}",
                drained.outcome.describe()
            ));
        }
        verify(&m, 0x77)?;
        let now = crate::linux::vma::pagemap_pfn(m.addr())
            .ok()
            .flatten()
            .map_or("none".to_string(), |p| format!("{p:#x}"));
        Ok((
            format!("memory{block}: EBUSY in {:.3} s while held, then offline in {:.3} s; pfn {pfn:#x} -> {now}, data intact", held.elapsed.as_secs_f64(), drained.elapsed.as_secs_f64()),
            left,
        ))
    })();
    match res {
        Ok((note, left)) => {
            r.ok_note(WHAT, note);
            left
        }
        Err(e) => {
            r.fail(WHAT, e);
            Vec::new()
        }
    }
}
