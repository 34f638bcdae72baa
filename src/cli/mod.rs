//! The binary's commands beyond `serve` (a part of `main.rs`, outside the library's layers).

pub mod backup;
pub mod cluster;
pub mod import;
