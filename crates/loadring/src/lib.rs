//! # loadring
//!
//! Load-balancing policies behind one API, with consistent hashing that places
//! keys exactly like the systems already in production (brpc, Envoy,
//! memcached clients) and bounded loads on every hashing policy.
//!
//! A [`PolicySpec`] names the policy in brpc's syntax; a [`Balancer`] runs it
//! over a changing set of [`Endpoint`]s; [`Balancer::pick`] returns a [`Pick`]
//! guard that holds one in-flight slot until dropped.
//!
//! ```
//! use loadring::{Balancer, Endpoint, Request};
//!
//! let endpoints = vec![Endpoint::new("10.0.0.1:80")?, Endpoint::new("10.0.0.2:80")?];
//! let balancer = Balancer::new("c_murmurhash".parse()?, endpoints)?;
//! // Keys land where brpc's c_murmurhash puts them.
//! let pick = balancer.pick(&Request::key("user:42"))?;
//! println!("user:42 -> {}", pick.addr());
//! # Ok::<(), loadring::Error>(())
//! ```
//!
//! ## Errors
//! Nothing in this crate panics on bad input: parsing, building and picking
//! return [`Error`], whose message names the culprit and the accepted range.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod balancer;
mod bounded;
mod brpc;
pub mod clock;
mod describe;
mod duration;
mod endpoint;
mod error;
pub mod hash;
mod hashing;
mod ketama;
mod lifecycle;
mod load;
pub mod maglev;
mod params;
pub mod policy;
mod pool;
mod request;
pub mod ring;
mod ring_hash;
mod rng;
mod spec;
mod wavelet;

pub use balancer::{Balancer, Candidate, Candidates};
pub use bounded::LoadFactor;
pub use describe::Layout;
pub use endpoint::{Endpoint, Id};
pub use error::{
    BuildError, BuildErrorKind, Error, ParseError, PickError, Result, UnknownEndpoint,
};
pub use load::{Outcome, Pick};
pub use request::Request;
pub use spec::{PolicySpec, MAX_NESTING, POLICY_NAMES};

/// The README's Rust example, compiled and run by `cargo test` so it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
