/* fuzz.h: what every fuzz target shares (tests/fuzz/driver.c): scratch files for parsers that
 * want a path, and the CRC fix-ups that let mutated inputs past a format's checksums.
 *
 * Each tests/fuzz/fuzz_NAME.c defines LLVMFuzzerTestOneInput. Built with libFuzzer
 * (`make fuzz`, -DCOLI_LIBFUZZER) it is fuzzed; built plainly (`make`) driver.c's main runs it
 * over every file of the folders on its command line: bin/fuzz/fuzz_NAME tests/fuzz/corpus/NAME.
 * A target never aborts on bad input and frees whatever the parser gave it. */
#ifndef COLI_FUZZ_H
#define COLI_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The process's scratch folder (mkdtemp in $TMPDIR, removed with its files at exit); NULL if it
 * cannot be made. */
const char *fuzz_dir(void);

/* Writes size bytes of data to fuzz_dir()/name, then pad zero bytes (sparse, never written):
 * the path (valid until the next call), or NULL. */
const char *fuzz_write(const char *name, const void *data, size_t size, size_t pad);

/* A copy of data with a NUL after it (caller frees), or NULL. */
char *fuzz_text(const uint8_t *data, size_t size);

/* Little-endian store of v (4 or 8 bytes) and of the CRC32 of n bytes at from. */
void fuzz_put32(uint8_t *p, uint32_t v);
void fuzz_put64(uint8_t *p, uint64_t v);
void fuzz_put_crc(uint8_t *p, const uint8_t *from, size_t n);

/* Runs run(data) on the input as it is, then on a copy that fix edited in place (fix returns -1
 * when it does not apply, e.g. the input is too short), unless the copy came out unchanged. The
 * fixes make a format's lengths and CRCs right so that mutations reach the checks behind them. */
typedef void (*fuzz_run_fn)(const uint8_t *data, size_t size, void *ctx);
typedef int (*fuzz_fix_fn)(uint8_t *data, size_t size);
void fuzz_raw_and_fixed(const uint8_t *data, size_t size, fuzz_fix_fn fix, fuzz_run_fn run,
			void *ctx);

/* The fix of the 128-byte-header formats whose payload follows the header (.coli_usage,
 * .coli_kv): payload_size (72), payload_crc32 (80), header_crc32 (124). */
int fuzz_fix_payload_header(uint8_t *data, size_t size);

/* The whole target for those formats: the input, raw and fixed, written to fuzz_dir()/name and
 * given to read with the identity the file claims (bytes 16..47, zeros where it is shorter). */
typedef void (*fuzz_read_fn)(const char *path, const uint8_t identity[32]);
void fuzz_payload_file(const uint8_t *data, size_t size, const char *name, fuzz_read_fn read);

#endif
