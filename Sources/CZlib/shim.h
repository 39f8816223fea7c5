// The system's zlib, for the archives' deflate and gzip streams (no hand-written inflate). inflateInit2 is a macro
// Swift cannot call, so it is wrapped here; everything else is called as zlib declares it.
#include <zlib.h>

/// inflateInit2(strm, windowBits): -15 raw deflate (zip members, a seek point), 31 gzip (a .tar.gz from its start).
static inline int rfs_inflate_init(z_stream *strm, int window_bits) {
    return inflateInit2(strm, window_bits);
}
