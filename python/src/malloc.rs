//! glibc's adaptive mmap threshold, moved at import to where a process that has freed one
//! large block already has it.
//!
//! glibc serves a request above its mmap threshold (128 KiB at start) with a mapping of its
//! own and unmaps it on free; freeing such a block raises the threshold to its size. A Rust
//! process that read its input with Rust has freed large blocks long before it writes, so
//! its writes reuse heap memory. A Python process whose input came through pyarrow's own
//! memory pool has not: each page a write compresses and each 4 MiB upload chunk is a new
//! mapping the kernel zeroes page by page, which made the package's load of 10M rows a
//! fifth slower than the same load from Rust.

/// A little above the writer's 4 MiB upload chunks, so they and the compressed pages come
/// from glibc's heaps. The threshold's rise also lifts glibc's trim threshold to twice
/// this, which bounds what a thread's heap keeps free; a larger block kept more (the
/// load's peak rose 50 MiB with 32 MiB) for no measured gain.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const BLOCK: usize = 4 * 1024 * 1024 + 64 * 1024;

/// Allocates one [`BLOCK`] and frees it, which raises glibc's thresholds as that free
/// would in any process; later requests are served as glibc's own adaptation would serve
/// them. Does nothing off glibc, or where the threshold is already higher.
pub(crate) fn raise_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // `black_box` keeps the compiler from eliding the allocation and its free.
        let block: Vec<u8> = Vec::with_capacity(BLOCK);
        drop(std::hint::black_box(block));
    }
}
