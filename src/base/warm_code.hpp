// Maps memarea's own machine code into the page tables ahead of use. A process's first call of
// a path (the first export, the first import) otherwise takes a page fault for each part of the
// library it has not run yet: measured on sim, those faults were most of what the first export
// cost above the driver's own call. The background thread calls this once, so no
// user's call pays for it.
#pragma once

namespace memarea::detail {

/// Populates the page-table entries of the executable segment that holds memarea's code
/// (MADV_POPULATE_READ, Linux 5.14+; on older kernels, one read per page). Reads only; never
/// fails the caller: returns the bytes made resident-mapped, 0 when it could not.
unsigned long warm_own_code() noexcept;

}  // namespace memarea::detail
