/* CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected; the checksum of iSCSI,
 * ext4 and SSE4.2's crc32 instruction). crc32c("123456789") = 0xE3069283.
 *
 * The value is chainable: crc32c(crc32c(0, a, la), b, lb) == crc32c(0, a||b, la+lb).
 * Start with 0. The SSE4.2 instruction is used when the CPU has it (checked once
 * with CPUID); otherwise a table-driven software version. Both give identical
 * results; the two are exposed for the tests. Thread-safe. */
#ifndef PODDB_LOG_CRC32C_H
#define PODDB_LOG_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

/* The software version (always available). */
uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len);
/* True when the CPU has SSE4.2 and crc32c_hw may be called. */
bool crc32c_hw_available(void);
/* The SSE4.2 version; only when crc32c_hw_available() (else it is crc32c_sw). */
uint32_t crc32c_hw(uint32_t crc, const void *buf, size_t len);

#endif
