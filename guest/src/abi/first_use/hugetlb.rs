//! The 1 GiB hugetlb pages the gigantic benchmarks and tests need: a free
//! page for the kernel's own first fault ([`HugePage`]), and the boot-time
//! pages handed back to the buddy allocator ([`BootPool`]).

use std::fs;

fn read_num(path: &str) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The sysfs directory of `nid`'s 1 GiB hugetlb pages.
fn huge_dir(nid: u32) -> String {
    format!("/sys/devices/system/node/node{nid}/hugepages/hugepages-1048576kB")
}

/// A free 1 GiB hugetlb page on `nid` for the lifetime of the value: the
/// boot pool's, or one reserved now and given back on drop.
pub struct HugePage {
    nr_path: String,
    restore: Option<u64>,
    pub how: &'static str,
    /// `vm.movable_gigantic_pages` set to 1 while the page is held.
    _movable: Option<SetFile>,
}

/// `vm.movable_gigantic_pages` (mm/hugetlb.c): with 1, a runtime 1 GiB
/// hugetlb allocation may come from ZONE_MOVABLE, all a CXL node onlined
/// `online_movable` has (tierkit's own opt-in is `movable_gigantic`).
const MOVABLE_GIGANTIC_PAGES: &str = "/proc/sys/vm/movable_gigantic_pages";

/// A file set to a value while the guard lives, its old contents written
/// back on drop.
struct SetFile {
    path: &'static str,
    old: String,
}

impl SetFile {
    /// `None` if the file cannot be read or written (e.g. it does not
    /// exist in this kernel).
    fn set(path: &'static str, value: &str) -> Option<SetFile> {
        let old = fs::read_to_string(path).ok()?;
        fs::write(path, value).ok()?;
        Some(SetFile {
            path,
            old: old.trim().to_string(),
        })
    }
}

impl Drop for SetFile {
    fn drop(&mut self) {
        let _ = fs::write(self.path, &self.old);
    }
}

impl HugePage {
    /// Makes sure `nid` has a free 1 GiB hugetlb page (see [`HugePage`]).
    pub fn get(nid: u32) -> Result<HugePage, String> {
        let dir = huge_dir(nid);
        let nr_path = format!("{dir}/nr_hugepages");
        let nr = read_num(&nr_path)
            .ok_or_else(|| format!("no {nr_path} (CONFIG_HUGETLBFS, pdpe1gb?)"))?;
        if read_num(&format!("{dir}/free_hugepages")).unwrap_or(0) > 0 {
            return Ok(HugePage {
                nr_path,
                restore: None,
                how: "from the boot pool",
                _movable: None,
            });
        }
        let hp = HugePage {
            nr_path,
            restore: Some(nr),
            how: "reserved at runtime",
            _movable: SetFile::set(MOVABLE_GIGANTIC_PAGES, "1"),
        };
        fs::write(&hp.nr_path, format!("{}\n", nr + 1))
            .map_err(|e| format!("write {}: {e}", hp.nr_path))?;
        if read_num(&hp.nr_path) != Some(nr + 1) {
            return Err(format!(
                "no 1 GiB hugetlb page could be reserved on node {nid} at runtime \
                 (no free naturally aligned GiB)"
            ));
        }
        Ok(hp)
    }
}

impl Drop for HugePage {
    fn drop(&mut self) {
        if let Some(nr) = self.restore {
            let _ = fs::write(&self.nr_path, format!("{nr}\n"));
        }
    }
}

/// The node's boot-time 1 GiB hugetlb pages (`hugepagesz=1G
/// hugepages=N:K`), handed back to the buddy allocator for the lifetime of
/// the value and reserved again on drop. On a small guest the early boot
/// allocations can leave no free naturally aligned GiB for a runtime
/// allocation; a GiB reserved at boot and freed here is one, and tierkit
/// (`alloc_contig_pages()`), its pool and the runtime hugetlb reservation
/// then take it.
pub struct BootPool {
    nr_path: String,
    /// The count to reserve again on drop (`None`: nothing was released).
    pub restore: Option<u64>,
}

impl BootPool {
    /// Releases `nid`'s boot-time 1 GiB hugetlb pages if all of them are
    /// free; does nothing otherwise (or without any).
    pub fn release(nid: u32) -> BootPool {
        let dir = huge_dir(nid);
        let nr_path = format!("{dir}/nr_hugepages");
        let nr = read_num(&nr_path).unwrap_or(0);
        let free = read_num(&format!("{dir}/free_hugepages")).unwrap_or(0);
        let restore = (nr > 0 && free == nr && fs::write(&nr_path, "0\n").is_ok()).then_some(nr);
        BootPool { nr_path, restore }
    }
}

impl Drop for BootPool {
    fn drop(&mut self) {
        if let Some(nr) = self.restore {
            let _ = fs::write(&self.nr_path, format!("{nr}\n"));
        }
    }
}
