//! What an idle `foster init` keeps resident: only the pages its loop touches.
//!
//! Owns [`drop_startup_pages`]. foster is one binary with a dashboard, a supervisor and an async
//! runtime in it; `foster init` never runs those, but starting up (argument parsing, the
//! spawner thread, PROGRAM's launch) touches code and read-only data that the idle loop never
//! needs again, and the kernel maps file pages around every fault (fault-around), so several
//! megabytes of the executable stay mapped. Once PROGRAM runs, foster asks the kernel to unmap
//! from its own page tables every read-only, file-backed mapping that holds no private
//! (copy-on-write) page: `madvise(MADV_DONTNEED)` on such a mapping only drops page-table
//! entries, the page cache keeps the file's pages, and whatever the loop touches again is mapped
//! back by an ordinary minor fault. Writable mappings and mappings with private pages (the
//! relocated read-only data of a position-independent binary, for one) are never touched:
//! dropping those would lose their contents. Freed heap is handed back with `malloc_trim`.

/// Unmaps the pages of read-only file mappings the startup touched; returns how many bytes of
/// mappings were advised. Best effort: a mapping the kernel refuses is left as it is.
pub fn drop_startup_pages() -> usize {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return 0;
    };
    // Candidates: (start, end) of read-only mappings of a file; each is confirmed by its
    // "Anonymous:" line (0 kB: no private page).
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    let mut current: Option<(usize, usize)> = None;
    for line in smaps.lines() {
        if let Some(kb) = line.strip_prefix("Anonymous:") {
            if let Some(r) = current.take()
                && kb.trim().trim_end_matches("kB").trim() == "0"
            {
                ranges.push(r);
            }
            continue;
        }
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            continue;
        };
        let Some((start, end)) = range.split_once('-') else {
            continue; // a "Key: value" line
        };
        let (Ok(start), Ok(end)) = (
            usize::from_str_radix(start, 16),
            usize::from_str_radix(end, 16),
        ) else {
            continue;
        };
        let path = f.nth(3).unwrap_or("");
        let read_only_file = perms.as_bytes().get(1) == Some(&b'-') && path.starts_with('/');
        current = read_only_file.then_some((start, end));
    }
    drop(smaps);
    let mut advised = 0;
    for (start, end) in ranges {
        // SAFETY: the range is a whole read-only, file-backed mapping of this process with no
        // private page: dropping its page-table entries loses nothing.
        let r =
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
        if r == 0 {
            advised += end - start;
        }
    }
    // Give glibc's free heap pages back; musl's allocator returns them by itself and has no
    // malloc_trim (the static musl build).
    // SAFETY: malloc_trim has no preconditions.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::malloc_trim(0)
    };
    advised
}
