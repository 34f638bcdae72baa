//! Test support: every entry of a RocksDB table (`.sst`) file, deletion markers
//! included, decoded by RocksDB's own `SstFileReader` (compressed blocks too), so a
//! test can look for bytes that must not be stored anywhere.

use std::ffi::{c_char, c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

// The shim's symbols resolve against the RocksDB librocksdb-sys links.
use librocksdb_sys as _;

type EntryFn = extern "C" fn(*mut c_void, *const c_char, usize, *const c_char, usize);

extern "C" {
    fn rk_sst_scan(path: *const c_char, entry: EntryFn, context: *mut c_void) -> *mut c_char;
    fn rk_sst_free(message: *mut c_char);
}

/// One entry: the internal key (user key, then 8 bytes of sequence and kind) and the value.
pub type Entry = (Vec<u8>, Vec<u8>);

extern "C" fn collect(
    context: *mut c_void,
    key: *const c_char,
    key_length: usize,
    value: *const c_char,
    value_length: usize,
) {
    // SAFETY: `context` is the `Vec` passed by `entries` for the duration of the scan;
    // RocksDB hands valid slices of the given lengths, alive during the call.
    unsafe {
        let entries = &mut *(context as *mut Vec<Entry>);
        let key = std::slice::from_raw_parts(key as *const u8, key_length);
        let value = std::slice::from_raw_parts(value as *const u8, value_length);
        entries.push((key.to_vec(), value.to_vec()));
    }
}

/// Every entry of the table file at `path`, in file order.
pub fn entries(path: &Path) -> Result<Vec<Entry>, String> {
    let path = CString::new(path.as_os_str().as_bytes()).map_err(|error| error.to_string())?;
    let mut entries: Vec<Entry> = Vec::new();
    // SAFETY: the path is a NUL-terminated string; `collect` matches the callback type
    // and gets a pointer to `entries`, which outlives the call.
    let error = unsafe { rk_sst_scan(path.as_ptr(), collect, &mut entries as *mut Vec<Entry> as *mut c_void) };
    if error.is_null() {
        return Ok(entries);
    }
    // SAFETY: a non-null result is a NUL-terminated string from `strdup`.
    let message = unsafe { CStr::from_ptr(error) }.to_string_lossy().into_owned();
    unsafe { rk_sst_free(error) };
    Err(message)
}
