/* xfer_wire.h - the wire format of one KV handoff between a prefill and a
 * decode worker (docs/pd.md). Pure functions over memory: no I/O, no
 * allocation. Everything received is untrusted: decoders check every field
 * and length (tests/fuzz/fuzz_xfer_wire.c).
 *
 * A handoff is a sequence of messages on one transport connection, each an
 * active message of a fixed 64-byte frame header plus a data part:
 *   BEGIN   data: xfer_begin (fingerprint, salt digest, prompt length, block
 *           geometry, number of records that will follow)
 *   RECORDS data: `count` records of record_bytes each, records seq ..
 *           seq + count - 1 (the persistent store's object format,
 *           store/store_format.h, so one format serves store and wire; the
 *           layer above verifies them)
 *   WINDOW  data: the window-state snapshot at the end of the records
 *           (engine/swa_format.h: window rings of sliding-window layers and
 *           deepseek4's compressor state), exactly window_bytes as BEGIN
 *           announced; seq = n_records (its boundary block), count 0. At most
 *           one per handoff, only when BEGIN announced window_bytes; the layer
 *           above checks the snapshot itself
 *   END     no data; count = records sent in total; seq = WINDOW messages
 *           sent (0 or 1: the sender may fail to take the snapshot)
 *   ABORT   no data: the sender gave up (the receiver stops waiting)
 * Messages of one handoff may complete out of order (rendezvous); records are
 * placed by seq. Frame header, all integers little-endian:
 *   off size
 *     0   4  magic "CXH1"
 *     4   2  kind (XFER_MSG_*)
 *     6   2  reserved, zero
 *     8  16  handoff id (the 32 hex digits of X-Cinfer-Handoff-Id as bytes)
 *    24   4  seq (RECORDS: first record index; WINDOW: n_records; END: WINDOW messages sent)
 *    28   4  count (RECORDS: records in data; END: records sent in total)
 *    32   8  data length
 *    40  24  reserved, zero
 * BEGIN data (XFER_BEGIN_BYTES):
 *     0  32  store fingerprint of the sender's blocks (model + KV layout + block size + dtype)
 *    32  32  SHA-256 digest of the request's cache salt (tenant isolation)
 *    64   4  prompt tokens
 *    68   4  block tokens
 *    72   4  records that will follow (full prompt blocks before the last token)
 *    76   4  window bytes: the WINDOW snapshot's length, 0 when none will follow
 *    80   8  record bytes */
#ifndef CINFER_XFER_XFER_WIRE_H
#define CINFER_XFER_XFER_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define XFER_FRAME_BYTES 64
#define XFER_BEGIN_BYTES 88
#define XFER_ID_BYTES 16
#define XFER_DIGEST_BYTES 32
#define XFER_MAX_RECORDS (1 << 20)
#define XFER_MAX_RECORD_BYTES ((uint64_t)1 << 32)
#define XFER_MAX_WINDOW_BYTES ((uint32_t)1 << 31)

typedef enum xfer_msg_kind {
    XFER_MSG_BEGIN = 1,
    XFER_MSG_RECORDS = 2,
    XFER_MSG_WINDOW = 3,
    XFER_MSG_END = 4,
    XFER_MSG_ABORT = 5,
} xfer_msg_kind;

typedef struct xfer_frame {
    uint16_t kind;
    uint8_t id[XFER_ID_BYTES];
    uint32_t seq, count;
    uint64_t data_len;
} xfer_frame;

typedef struct xfer_begin {
    uint8_t fingerprint[XFER_DIGEST_BYTES];
    uint8_t salt_digest[XFER_DIGEST_BYTES];
    uint32_t prompt_tokens, block_tokens, n_records;
    uint32_t window_bytes; /* 0: no WINDOW follows; else only with n_records > 0 */
    uint64_t record_bytes;
} xfer_begin;

/* Encodes f into out[XFER_FRAME_BYTES]. */
void xfer_frame_encode(const xfer_frame *f, uint8_t out[XFER_FRAME_BYTES]);
/* Decodes and checks a frame header of len bytes whose data part is data_len
 * bytes long: 0, or -1 with err (bad magic, kind, reserved bytes, a data
 * length that disagrees with the kind). RECORDS sizes are checked against
 * record_bytes by xfer_records_check. */
int xfer_frame_decode(const uint8_t *buf, size_t len, uint64_t data_len, xfer_frame *f, cf_err *err);

void xfer_begin_encode(const xfer_begin *b, uint8_t out[XFER_BEGIN_BYTES]);
/* 0, or -1 with err (length, reserved bytes, zero or too large geometry). */
int xfer_begin_decode(const uint8_t *buf, size_t len, xfer_begin *b, cf_err *err);
/* A RECORDS frame against the handoff's BEGIN: records inside [0, n_records)
 * and data_len == count * record_bytes. 0, or -1 with err. */
int xfer_records_check(const xfer_frame *f, const xfer_begin *b, cf_err *err);

/* A WINDOW frame against the handoff's BEGIN: one was announced, data_len ==
 * window_bytes, seq == n_records. 0, or -1 with err. */
int xfer_window_check(const xfer_frame *f, const xfer_begin *b, cf_err *err);

/* The 32 hex digits of an id <-> its 16 bytes. parse: 0, or -1 (not exactly 32 hex digits). */
int xfer_id_parse(const char *hex, uint8_t id[XFER_ID_BYTES]);
void xfer_id_hex(const uint8_t id[XFER_ID_BYTES], char out[2 * XFER_ID_BYTES + 1]);

#endif
