// OpenCL status codes as names and hints, and the one place every OpenCL status is checked.
//
// check() turns a failing status into sdt::Error naming the call, the code's name (CL_OUT_OF_RESOURCES, not -5)
// and a hint. It is also where the test-only fault injection acts: a test arms a fault for a call name and the
// next matching check() reports that error, so recovery paths run on PoCL in CI.
#pragma once

#include <CL/cl.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace sdt::cl {

const char* error_name(cl_int status);
const char* error_hint(cl_int status);

// Throws sdt::Error (Device, or OutOfMemory for allocation failures) when status != CL_SUCCESS.
// `call` is the OpenCL function name; `context` says what we were doing (a kernel name, a buffer size).
void check(cl_int status, const char* call, std::string_view context = {});

// The throwing half of check(): `status` (not CL_SUCCESS) as sdt::Error, with no fault injection.
[[noreturn]] void fail_call(cl_int status, const char* call, std::string_view context);

// Returns the injected status for `call` if a fault is armed for it, else `status`.
cl_int inject(cl_int status, const char* call);

// check() where every launch passes, setting its arguments and enqueueing (tens of thousands of calls an image): the
// context's text is made by `context()` only when the call failed, not as a string on every call.
template <typename MakeContext>
void check_lazily(cl_int status, const char* call, const MakeContext& context) {
  status = inject(status, call);
  if (status != CL_SUCCESS) fail_call(status, call, context());
}

// Test-only fault injection. `call` is an OpenCL function name ("clEnqueueNDRangeKernel") or "*" for any (not
// kHangFault, which is armed only by its name);
// the fault fires on the `skip`+1-th matching check and the `times`-1 matching checks after it, then disarms
// (`times` < 0: every matching check fails until disarm_faults()).
void arm_fault(std::string call, cl_int status, int skip = 0, int times = 1);
// Pseudo call name for arm_fault: the matching Context::marker() makes the queue wait on an event that never
// completes, which to the host is exactly a kernel that never returns (the status passed is not used).
inline constexpr const char* kHangFault = "<hang>";
void disarm_faults();
// Test-only: completes every event an injected hang made a queue wait on, in any context, so that a thread blocked
// in a wait without a watchdog goes on (a test that left such a thread behind lets it end before the process does).
void release_injected_hangs();
// Context::marker registers the user event of an injected hang here (retained until released).
void register_injected_hang(cl_event user_event);
// Test-only: pooled buffers larger than `bytes` fail to allocate with CL_MEM_OBJECT_ALLOCATION_FAILURE, as on a
// device with less memory; 0 lifts the limit. Lets a test run out of memory in one stage and not in the others.
void limit_allocations(std::size_t bytes);
// Says whether a pooled buffer of `bytes` may be made, and records the largest asked for since the last reset, so
// that a test can set the limit from what this device's kernels really allocate.
bool allocation_allowed(std::size_t bytes);
std::size_t largest_allocation();
void reset_largest_allocation();

}  // namespace sdt::cl
