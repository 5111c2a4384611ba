//! Links the static dsp/ kernel that custom_ops/build.sh builds with CMake beforehand, and the
//! BLAS it calls (scipy-openblas32's shared library, `scipy_`-prefixed symbols), with an rpath
//! so that ONNX Runtime finds it when it loads the plugin.
//!
//!   HEXFUSE_NATIVE_LIB_DIR  directory with libhexfuse.a, libhexfuse_abi.a and libhexfuse_rpc_client.a
//!   HEXFUSE_BLAS_LIB        path of libscipy_openblas.so
//!
//! Nothing is downloaded, and ONNX Runtime itself is not linked (ort-sys: disable-linking).

use std::env;
use std::path::PathBuf;

fn required(var: &str) -> PathBuf {
    println!("cargo:rerun-if-env-changed={var}");
    match env::var_os(var) {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => panic!(
            "hexfuse-ort: {var} is not set. Build with `bash custom_ops/build.sh`, which builds the dsp/ \
             kernel with CMake first and sets HEXFUSE_NATIVE_LIB_DIR and HEXFUSE_BLAS_LIB."
        ),
    }
}

fn main() {
    let native = required("HEXFUSE_NATIVE_LIB_DIR");
    let blas = required("HEXFUSE_BLAS_LIB");
    for lib in ["libhexfuse.a", "libhexfuse_abi.a", "libhexfuse_rpc_client.a"] {
        let p = native.join(lib);
        if !p.is_file() {
            panic!("hexfuse-ort: {} not found (run `bash custom_ops/build.sh`)", p.display());
        }
        println!("cargo:rerun-if-changed={}", p.display());
    }
    if !blas.is_file() {
        panic!("hexfuse-ort: HEXFUSE_BLAS_LIB={} is not a file (pip install scipy-openblas32)", blas.display());
    }
    let blas_dir = blas.parent().expect("BLAS library path has a directory");
    let blas_name = blas
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("lib"))
        .and_then(|n| n.split(".so").next())
        .expect("HEXFUSE_BLAS_LIB names a lib*.so file")
        .to_string();

    println!("cargo:rustc-link-search=native={}", native.display());
    println!("cargo:rustc-link-lib=static=hexfuse");
    println!("cargo:rustc-link-lib=static=hexfuse_abi");
    // The FastRPC client of the hexagon backend; it dlopen()s libcdsprpc.so at run time.
    println!("cargo:rustc-link-lib=static=hexfuse_rpc_client");
    println!("cargo:rustc-link-lib=dylib=dl");
    println!("cargo:rustc-link-search=native={}", blas_dir.display());
    println!("cargo:rustc-link-lib=dylib={blas_name}");
    println!("cargo:rustc-link-lib=dylib=m");
    println!("cargo:rustc-link-lib=dylib=pthread");
    // Find the BLAS where it is installed, whatever the loader's path.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-rpath,{}", blas_dir.display());
    // Never unmapped: the pool's worker threads run code of this library for the life of the
    // process, while ONNX Runtime dlclose()s a custom-op library when its last session goes.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--no-undefined");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libhexfuse_ort.so");
}
