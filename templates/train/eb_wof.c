/* edgebuild weight-only file (.wof), format version 1: see eb_wof.h and edgebuild/wof.py.
 * The reader makes the same checks in the same order as edgebuild.wof.decode. */
#include "eb_wof.h"

#include <string.h>

/* Floats travel as their IEEE 754 binary32 bit pattern (memcpy to/from uint32_t). */
typedef char eb_wof_float_is_32_bits[(sizeof(float) == sizeof(uint32_t)) ? 1 : -1];

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static uint32_t get_u16(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8);
}

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v & 0xFFu);
    p[1] = (uint8_t)((v >> 8) & 0xFFu);
    p[2] = (uint8_t)((v >> 16) & 0xFFu);
    p[3] = (uint8_t)((v >> 24) & 0xFFu);
}

static void put_u16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v & 0xFFu);
    p[1] = (uint8_t)((v >> 8) & 0xFFu);
}

static float get_f32(const uint8_t *p)
{
    uint32_t bits = get_u32(p);
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static void put_f32(uint8_t *p, float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    put_u32(p, bits);
}

const char *eb_wof_message(eb_wof_status s)
{
    switch (s) {
    case EB_WOF_OK: return "ok";
    case EB_WOF_ERR_SHORT: return "file shorter than its header and table";
    case EB_WOF_ERR_MAGIC: return "not an edgebuild weight file (magic is not EBWF)";
    case EB_WOF_ERR_VERSION: return "unsupported weight file version (this code reads 1)";
    case EB_WOF_ERR_RESERVED: return "reserved header field is not 0";
    case EB_WOF_ERR_SIZE: return "size field differs from the file length (truncated?)";
    case EB_WOF_ERR_CRC: return "crc32 mismatch: corrupted or half-written file";
    case EB_WOF_ERR_LAYOUT: return "layout id differs: file is for another model";
    case EB_WOF_ERR_COUNT: return "tensor count differs from the model's";
    case EB_WOF_ERR_TENSOR: return "bad tensor table entry (offset or element count)";
    case EB_WOF_ERR_CAPACITY: return "weight file does not fit the buffer";
    }
    return "unknown weight file status";
}

uint32_t eb_wof_crc32(const uint8_t *data, uint32_t len)
{
    /* crc of each 4-bit value, reflected polynomial 0xEDB88320 */
    static const uint32_t nibble[16] = {
        0x00000000u, 0x1DB71064u, 0x3B6E20C8u, 0x26D930ACu,
        0x76DC4190u, 0x6B6B51F4u, 0x4DB26158u, 0x5005713Cu,
        0xEDB88320u, 0xF00F9344u, 0xD6D6A3E8u, 0xCB61B38Cu,
        0x9B64C2B0u, 0x86D3D2D4u, 0xA00AE278u, 0xBDBDF21Cu};
    uint32_t crc = 0xFFFFFFFFu;
    uint32_t i;
    for (i = 0; i < len; ++i) {
        crc ^= data[i];
        crc = (crc >> 4) ^ nibble[crc & 0xFu];
        crc = (crc >> 4) ^ nibble[crc & 0xFu];
    }
    return crc ^ 0xFFFFFFFFu;
}

/* Size of the file; tensors == NULL counts every tensor as present. 0 if above 4 GiB - 1.
 * Header, table entries and floats are all multiples of 4 bytes, so every tensor offset
 * is aligned without padding. */
static uint32_t file_size(uint32_t count, const uint32_t *elements,
                          const float *const *tensors)
{
    uint32_t size, i;
    if (count > (0xFFFFFFFFu - EB_WOF_HEADER_BYTES) / EB_WOF_ENTRY_BYTES) {
        return 0u;
    }
    size = EB_WOF_HEADER_BYTES + EB_WOF_ENTRY_BYTES * count;
    for (i = 0; i < count; ++i) {
        if (tensors != NULL && tensors[i] == NULL) {
            continue;
        }
        if (elements[i] > (0xFFFFFFFFu - size) / 4u) {
            return 0u;
        }
        size += 4u * elements[i];
    }
    return size;
}

uint32_t eb_wof_size(uint32_t count, const uint32_t *elements)
{
    return file_size(count, elements, NULL);
}

static eb_wof_status check_header(const uint8_t *buf, uint32_t len, uint32_t layout_id,
                                  uint32_t count)
{
    if (buf == NULL || len < EB_WOF_HEADER_BYTES) {
        return EB_WOF_ERR_SHORT;
    }
    if (buf[0] != 0x45u || buf[1] != 0x42u || buf[2] != 0x57u || buf[3] != 0x46u) {
        return EB_WOF_ERR_MAGIC;
    }
    if (get_u16(buf + 4) != EB_WOF_VERSION) {
        return EB_WOF_ERR_VERSION;
    }
    if (get_u16(buf + 6) != 0u) {
        return EB_WOF_ERR_RESERVED;
    }
    if (get_u32(buf + 12) != len) {
        return EB_WOF_ERR_SIZE;
    }
    if (get_u32(buf + 20) !=
        eb_wof_crc32(buf + EB_WOF_HEADER_BYTES, len - EB_WOF_HEADER_BYTES)) {
        return EB_WOF_ERR_CRC;
    }
    if (get_u32(buf + 16) != layout_id) {
        return EB_WOF_ERR_LAYOUT;
    }
    if (get_u32(buf + 8) != count) {
        return EB_WOF_ERR_COUNT;
    }
    if ((len - EB_WOF_HEADER_BYTES) / EB_WOF_ENTRY_BYTES < count) {
        return EB_WOF_ERR_SHORT;
    }
    return EB_WOF_OK;
}

/* One table entry, in the order of edgebuild.wof._entry_problem. *end is the end of the
 * previous present tensor's data on entry and of this one's on return. */
static eb_wof_status check_entry(const uint8_t *entry, uint32_t len, uint32_t data_start,
                                 uint32_t elements, uint32_t *end)
{
    uint32_t offset = get_u32(entry);
    uint32_t n = get_u32(entry + 4);
    if (offset == EB_WOF_ABSENT) {
        return n == 0u ? EB_WOF_OK : EB_WOF_ERR_TENSOR;
    }
    if (offset < data_start || offset > len || offset % 4u != 0u || n != elements) {
        return EB_WOF_ERR_TENSOR;
    }
    if (n > (len - offset) / 4u || offset < *end) { /* past the end; overlap */
        return EB_WOF_ERR_TENSOR;
    }
    *end = offset + 4u * n;
    return EB_WOF_OK;
}

eb_wof_status eb_wof_read(const uint8_t *buf, uint32_t len, uint32_t layout_id,
                          uint32_t count, const uint32_t *elements, float *const *tensors)
{
    uint32_t data_start, end, i, k;
    eb_wof_status status = check_header(buf, len, layout_id, count);
    if (status != EB_WOF_OK) {
        return status;
    }
    data_start = EB_WOF_HEADER_BYTES + EB_WOF_ENTRY_BYTES * count; /* <= len: checked */
    end = data_start;
    for (i = 0; i < count; ++i) {
        status = check_entry(buf + EB_WOF_HEADER_BYTES + EB_WOF_ENTRY_BYTES * i, len,
                             data_start, elements[i], &end);
        if (status != EB_WOF_OK) {
            return status;
        }
    }
    /* The whole file is valid: only now overwrite the weights. */
    for (i = 0; i < count; ++i) {
        uint32_t offset = get_u32(buf + EB_WOF_HEADER_BYTES + EB_WOF_ENTRY_BYTES * i);
        if (offset == EB_WOF_ABSENT) {
            continue;
        }
        for (k = 0; k < elements[i]; ++k) {
            tensors[i][k] = get_f32(buf + offset + 4u * k);
        }
    }
    return EB_WOF_OK;
}

eb_wof_status eb_wof_write(uint8_t *buf, uint32_t capacity, uint32_t layout_id,
                           uint32_t count, const uint32_t *elements,
                           const float *const *tensors, uint32_t *written)
{
    uint32_t size = file_size(count, elements, tensors);
    uint32_t offset, i, k;
    if (written != NULL) {
        *written = 0u;
    }
    if (buf == NULL || size == 0u || size > capacity) {
        return EB_WOF_ERR_CAPACITY;
    }
    buf[0] = 0x45u; /* "EBWF" */
    buf[1] = 0x42u;
    buf[2] = 0x57u;
    buf[3] = 0x46u;
    put_u16(buf + 4, EB_WOF_VERSION);
    put_u16(buf + 6, 0u);
    put_u32(buf + 8, count);
    put_u32(buf + 12, size);
    put_u32(buf + 16, layout_id);
    offset = EB_WOF_HEADER_BYTES + EB_WOF_ENTRY_BYTES * count;
    for (i = 0; i < count; ++i) {
        uint8_t *entry = buf + EB_WOF_HEADER_BYTES + EB_WOF_ENTRY_BYTES * i;
        if (tensors[i] == NULL) {
            put_u32(entry, EB_WOF_ABSENT);
            put_u32(entry + 4, 0u);
            continue;
        }
        put_u32(entry, offset);
        put_u32(entry + 4, elements[i]);
        for (k = 0; k < elements[i]; ++k) {
            put_f32(buf + offset + 4u * k, tensors[i][k]);
        }
        offset += 4u * elements[i];
    }
    put_u32(buf + 20, eb_wof_crc32(buf + EB_WOF_HEADER_BYTES, size - EB_WOF_HEADER_BYTES));
    if (written != NULL) {
        *written = size;
    }
    return EB_WOF_OK;
}
