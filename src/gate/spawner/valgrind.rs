//! Whether foster runs under valgrind, which emulates a `CLONE_VM | CLONE_VFORK` child as a
//! fork but ends the process on one that also has `CLONE_FILES`: there every launch copies the
//! descriptor table (as when the reserved slots do not fit) and waits for the report pipe's end.
//! The gate is the same.

use std::sync::OnceLock;

/// Whether foster runs under valgrind, asked once with valgrind's `RUNNING_ON_VALGRIND` request.
pub fn under_valgrind() -> bool {
    static UNDER: OnceLock<bool> = OnceLock::new();
    *UNDER.get_or_init(|| running_on_valgrind() != 0)
}

/// Valgrind's client request `RUNNING_ON_VALGRIND` (0x1001): how many valgrinds run this
/// process, 0 natively.
#[cfg(target_arch = "x86_64")]
fn running_on_valgrind() -> u64 {
    let args: [u64; 6] = [0x1001, 0, 0, 0, 0, 0];
    let mut result: u64 = 0;
    // SAFETY: valgrind's request sequence (valgrind.h): the four rotations of rdi add up to 128
    // bits and `xchg rbx, rbx` swaps a register with itself, so natively nothing changes and
    // rdx keeps its 0; valgrind puts its answer in rdx. It only reads `args`.
    unsafe {
        std::arch::asm!(
            "rol rdi, 3",
            "rol rdi, 13",
            "rol rdi, 61",
            "rol rdi, 51",
            "xchg rbx, rbx",
            inout("rdx") result,
            in("rax") args.as_ptr(),
            inout("rdi") 0u64 => _,
            options(nostack),
        );
    }
    result
}

/// Elsewhere foster does not look for valgrind.
#[cfg(not(target_arch = "x86_64"))]
fn running_on_valgrind() -> u64 {
    0
}
