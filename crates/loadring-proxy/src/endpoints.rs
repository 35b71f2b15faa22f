//! The endpoints file: one endpoint per line, blank lines and `#` comments
//! ignored (the format `loadring place --endpoints` reads). The parser
//! lives in `loadring-discovery`, which also follows the file.

pub use loadring_discovery::parse_endpoints;
