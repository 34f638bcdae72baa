//! Handing memory the process freed back to the operating system once a burst of
//! work is over.
//!
//! The binary allocates through mimalloc (`src/main.rs`); RocksDB's C++ allocates
//! through glibc malloc. Neither gives freed memory back by itself while the thread
//! that owns it sleeps: mimalloc purges a thread's free pages on a later allocation of
//! that thread, and glibc trims only the top of an arena. So the threads that free the
//! most after a burst release it themselves once they have been quiet for
//! [`QUIET_FOR`] ([`QuietRelease`]): the learner (each snapshot it replaces held
//! copies of every item state that changed) and the shard hosts (events, live states
//! passivated). Without it the node's RSS stayed at the burst's peak until the next
//! burst.
//!
//! The library's own tests count their allocations here too (`counting`), to weigh
//! what a structure holds.

use std::time::{Duration, Instant};

/// How long a thread must have been without work before it hands freed memory back:
/// past a burst, not between two batches of one.
pub const QUIET_FOR: Duration = Duration::from_secs(1);

/// Whether a thread owes a release: it worked since the last one.
#[derive(Debug, Default)]
pub struct QuietRelease {
    /// When the thread last worked, if it has since the last release.
    last_work: Option<Instant>,
}

impl QuietRelease {
    /// The thread worked at `now`.
    pub fn worked(&mut self, now: Instant) {
        self.last_work = Some(now);
    }

    /// When a release will be due, if one is owed.
    pub fn due(&self) -> Option<Instant> {
        self.last_work.map(|at| at + QUIET_FOR)
    }

    /// Releases freed memory if one is owed and the thread has been quiet for
    /// [`QUIET_FOR`] at `now`; says whether it did.
    pub fn release_if_quiet(&mut self, now: Instant) -> bool {
        if !self.due().is_some_and(|due| now >= due) {
            return false;
        }
        self.last_work = None;
        release_freed_memory();
        true
    }
}

/// Returns the memory both allocators hold free to the operating system. It walks the
/// calling thread's heap and glibc's arenas: call it when idle, not on a request's
/// path. When mimalloc is not the global allocator (the library's tests), its part
/// finds nothing to return.
pub fn release_freed_memory() {
    // SAFETY: mi_collect only walks mimalloc's own structures; `force` purges the free
    // pages now rather than after mimalloc's purge delay.
    unsafe { libmimalloc_sys::mi_collect(true) };
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes a plain integer (the padding to keep) and only releases
    // free pages of glibc's arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The library's tests allocate through the system allocator, counted by thread, so a
/// test can weigh what a structure holds on the heap ([`counting::held_by_this_thread`]).
#[cfg(test)]
pub mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        /// Bytes this thread allocated less those it freed.
        static HELD: Cell<isize> = const { Cell::new(0) };
    }

    fn count(bytes: isize) {
        // A thread's last frees may come after its locals are gone: not counted.
        let _ = HELD.try_with(|held| held.set(held.get() + bytes));
    }

    struct Counting;

    // SAFETY: every call is passed on to the system allocator unchanged.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            count(layout.size() as isize);
            unsafe { System.alloc(layout) }
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            count(layout.size() as isize);
            unsafe { System.alloc_zeroed(layout) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            count(new_size as isize - layout.size() as isize);
            unsafe { System.realloc(ptr, layout, new_size) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            count(-(layout.size() as isize));
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    /// Bytes this thread allocated and has not freed (as requested, before the
    /// allocator's rounding).
    pub fn held_by_this_thread() -> isize {
        HELD.with(Cell::get)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_is_owed_after_work_and_taken_once_quiet() {
        let mut release = QuietRelease::default();
        let start = Instant::now();
        assert_eq!(release.due(), None);
        assert!(
            !release.release_if_quiet(start + QUIET_FOR),
            "nothing worked, nothing owed"
        );
        release.worked(start);
        assert!(
            !release.release_if_quiet(start + QUIET_FOR / 2),
            "not quiet long enough"
        );
        release.worked(start + QUIET_FOR / 2);
        assert_eq!(
            release.due(),
            Some(start + QUIET_FOR / 2 + QUIET_FOR),
            "work moves it on"
        );
        assert!(release.release_if_quiet(start + 2 * QUIET_FOR));
        assert_eq!(release.due(), None, "taken");
        assert!(!release.release_if_quiet(start + 3 * QUIET_FOR), "once a burst");
    }
}
