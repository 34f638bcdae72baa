//! The chat phrase suite of issue 18 (the behaviour is /tmp/rk/chat18.md, kept in
//! the issue): messages and multi-turn scripts over two catalogs, each with the
//! constraints chat must understand and a check on what comes back.
//!
//! Layout:
//! - `catalog`: the items as the suite knows them, the price and year quantiles the
//!   bands are computed from, loading rows into a server; the MovieLens catalog.
//! - `want`: what a turn must have understood ([`want::Want`], written with
//!   builders), resolved into an [`want::Expected`] that is compared with the
//!   answer's `constraints` and that every returned item must satisfy.
//! - `case`: cases (one conversation each) and turns, and their builders.
//! - `run`: runs a catalog's cases against its server, collecting every failure;
//!   the report (failure table, pass rate, BENCHMARKS.md section).
//! - `movies`, `tours`: the case tables; `tours` also generates its catalog.

pub mod case;
pub mod catalog;
pub mod movies;
pub mod run;
pub mod tours;
pub mod want;
