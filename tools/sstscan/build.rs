//! Compiles the shim over RocksDB's `SstFileReader` against the headers of the
//! RocksDB that librocksdb-sys built (and links): it names them in
//! `DEP_ROCKSDB_CARGO_MANIFEST_DIR`.

use std::env;
use std::path::PathBuf;

fn main() {
    let rocksdb = PathBuf::from(env::var("DEP_ROCKSDB_CARGO_MANIFEST_DIR").expect("librocksdb-sys names its sources"));
    println!("cargo:rerun-if-changed=src/shim.cc");
    cc::Build::new()
        .cpp(true)
        .file("src/shim.cc")
        .include(rocksdb.join("rocksdb/include"))
        .flag("-std=c++20")
        // As librocksdb-sys builds RocksDB (without its `rtti` feature).
        .flag("-fno-rtti")
        .define("NDEBUG", Some("1"))
        .warnings(false)
        .compile("rankstream_sstscan");
}
