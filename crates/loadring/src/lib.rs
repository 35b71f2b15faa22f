//! # loadring
//!
//! Load-balancing policies behind one API, with consistent hashing that places
//! keys exactly like the systems already in production (brpc, Envoy,
//! memcached clients, nginx, HAProxy, twemproxy, Apache Dubbo, dubbo-go-pixiu) and bounded loads on every
//! hashing policy.
//!
//! A [`PolicySpec`] names the policy in brpc's syntax; a [`Balancer`] runs it
//! over a changing set of [`Endpoint`]s; [`Balancer::pick`] returns a [`Pick`]
//! guard that holds one in-flight slot until dropped. Every answer
//! ([`Pick`], [`LocalPick`], [`Route`], [`Candidate`]) dereferences to the
//! same view of the endpoint chosen, a [`Backend`].
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
//! Embedded in a proxy or a client, each endpoint carries a value of your own
//! type ([`Balancer::with_backends`]), [`Balancer::candidates`] gives the
//! order of preference for retries, [`Pick::finish`] reports a request's
//! [`Outcome`], and [`policy`] holds the traits a policy of your own
//! implements to run with the same guards, health and exclusions.
//!
//! ## Picking fast
//! [`Balancer::pick`]'s guard can go anywhere (another thread, a future);
//! that costs shared reference counts on every pick. A thread that picks and
//! releases itself takes a [`Balancer::local`] handle: its [`LocalPick`]
//! guards borrow the handle and cost the policy's lookup and the in-flight
//! count, nothing more (for plain hashing policies, not even an atomic
//! read-modify-write).
//! [`Balancer::route`] answers where a hashing policy places a request
//! without reserving or allocating anything (a cache client sharding keys).
//!
//! ## Errors
//! Nothing in this crate panics on bad input. Parsing returns [`ParseError`]
//! (with the key, the value and what is accepted), building a balancer
//! [`BuildError`], picking [`PickError`]; each message names the culprit and
//! the accepted range, and [`Error`] is any of them. Each is an opaque struct
//! with accessors for the parts its message quotes, and `kind()` where it
//! has several kinds.

// One module has `unsafe` code, allowed block by block: `balancer/local_pick.rs`,
// whose guards point into the snapshots their handle keeps (its doc says
// why that is sound and what it saves).
#![deny(unsafe_code)]
#![warn(missing_docs)]

// Layers, lowest first; a file imports only from its own layer or below:
// the basic types (error, echo, clock, endpoint, request, describe), util/,
// hash/, inflight/ (members, counters, outcomes), policy/ (the traits, the
// classic families, the endpoint lifecycle), placement/ (consistent
// hashing), spec.rs (names to policies), balancer/ (what callers hold).
mod balancer;
pub mod clock;
mod describe;
mod echo;
mod endpoint;
mod error;
pub mod hash;
mod inflight;
pub mod orca;
mod placement;
pub mod policy;
mod request;
mod spec;
mod util;

pub use balancer::backend::Backend;
pub use balancer::local::LocalBalancer;
pub use balancer::local_pick::LocalPick;
pub use balancer::member_state::MemberState;
pub use balancer::pick::Pick;
pub use balancer::route::Route;
pub use balancer::{Balancer, Candidate, Candidates};
pub use describe::Layout;
pub use echo::{Echo, EchoBytes, MAX_ECHO};
pub use endpoint::{Endpoint, Id};
pub use error::{
    BuildError, BuildErrorKind, Error, ErrorKind, ParseError, ParseErrorKind, PickError,
    PickErrorKind, Result, UnknownEndpoint,
};
pub use inflight::fleet::{LoadReport, DEFAULT_REPORT_MAX_AGE};
#[doc(hidden)]
pub use inflight::member::SLOTS as LOCAL_SLOTS;
pub use inflight::outcome::Outcome;
#[doc(hidden)]
pub use placement::brpc::points_hashed;
pub use placement::envoy::maglev;
pub use placement::ring;
pub use policy::lifecycle::LifecycleView;
pub use request::Request;
pub use spec::{PolicySpec, MAX_NESTING, POLICY_NAMES};
pub use util::bounded::LoadFactor;
pub use util::duration::parse_duration;

/// The README's Rust example, compiled and run by `cargo test` so it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
