/*
 * Code layout hints.
 *
 * MDR_HOT marks the functions a small message passes through on its way
 * with one rail: the poll loop, a driver's receive handler up to the
 * request's completion, a send down to the driver.  Between two messages
 * of a ping-pong the process sits in the network's poll call, and the
 * kernel and the network library push that code out of the instruction
 * caches; spread over libmadrail's text (about 130 KB between the first
 * and the last of them), it came back a cache line and a page at a time.
 * GCC gathers hot functions in .text.hot (about 20 KB here) and optimises
 * them for speed.  Measured on tcp loopback over UCX: 0.10 us less a
 * one-way 8-byte message (docs/performance.md).
 *
 * The error paths are the other half: logging, a peer's protocol error and
 * a driver's refusal are declared cold where they are declared, so the
 * code that leads to them leaves the hot functions' bodies.
 */
#ifndef MDR_UTIL_COMPILER_H
#define MDR_UTIL_COMPILER_H

#if defined(__GNUC__) || defined(__clang__)
#define MDR_HOT __attribute__((hot))
#else
#define MDR_HOT
#endif

#endif /* MDR_UTIL_COMPILER_H */
