//! Nothing is generated here: the build-dependency on protoc-bin-vendored
//! is what makes cargo download the protoc that etcd-client's own build
//! script runs (through scripts/protoc, see .cargo/config.toml). This
//! checks that it is there, so a missing one is named.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if let Err(e) = protoc_bin_vendored::protoc_bin_path() {
        println!("cargo:warning=protoc-bin-vendored: {e}");
    }
}
