// zlib's inflate, wrapped for the archive readers (Archives/): a deflated zip member, a .tar.gz from its start, or
// a .tar.gz from one of its seek points. The z_stream lives in memory this class allocates and frees, because zlib
// keeps pointers into it between calls: a Swift struct that moved would break them. Only this file touches it.
//
// A seek point (zlib's examples/zran.c): inflating with Z_BLOCK stops at every deflate block boundary; there the
// compressed position, the count of bits of the current byte already used and the last 32 KiB of output are all a
// raw inflate needs to resume (inflatePrime gives it the bits, inflateSetDictionary the window).

import CZlib

/// One zlib inflate stream, fed compressed bytes by the caller and read into a byte array.
package final class Inflater {
    /// What the stream holds: raw deflate (zip members, a seek point's resumption) or gzip members.
    package enum Format {
        case rawDeflate
        case gzip

        fileprivate var windowBits: Int32 {
            switch self {
            case .rawDeflate: -15
            case .gzip: 31
            }
        }
    }

    /// What one `inflate` call did.
    package struct Step {
        /// Input bytes consumed.
        package var consumed: Int
        /// The stream (the deflate stream, or for gzip the member with its trailer) ended.
        package var streamEnded: Bool
        /// Stopped at a deflate block boundary that is not the last block's end (with `stopAtBlocks`).
        package var atBlockBoundary: Bool
        /// At a block boundary: the bits of the last consumed byte that belong to the next block (0 to 7).
        package var pendingBits: Int
    }

    /// Why zlib refused the stream: its message, or the code's name.
    package struct Failure: Error, Equatable {
        package var message: String
    }

    private let stream: UnsafeMutablePointer<z_stream>
    /// Where zlib writes, copied out after each call: an array's storage could move under zlib's pointer.
    private let scratch: UnsafeMutablePointer<UInt8>
    private static let scratchLength = 64 << 10

    /// Starts a stream (`inflateInit2`).
    package init(_ format: Format) throws(Failure) {
        // SAFETY: one z_stream, zeroed below, freed in deinit after inflateEnd; only this class reaches it.
        stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        // SAFETY: the scratch buffer is freed in deinit (or below), and only zlib and `inflate` write to it.
        scratch = UnsafeMutablePointer<UInt8>.allocate(capacity: Self.scratchLength)
        let status = rfs_inflate_init(stream, format.windowBits)
        guard status == Z_OK else {
            stream.deallocate()
            scratch.deallocate()
            throw Failure(message: "inflateInit2 failed (\(status))")
        }
    }

    deinit {
        inflateEnd(stream)
        stream.deallocate()
        scratch.deallocate()
    }

    /// Resumes a raw stream in the middle of a byte: `bits` (1 to 7) of `byte`'s high bits come first (`inflatePrime`).
    package func prime(bits: Int, byte: UInt8) throws(Failure) {
        let status = inflatePrime(stream, Int32(bits), Int32(byte >> (8 - bits)))
        guard status == Z_OK else { throw Failure(message: "inflatePrime failed (\(status))") }
    }

    /// Gives a raw stream the 32 KiB of output before its resumption point (`inflateSetDictionary`).
    package func setDictionary(_ window: [UInt8]) throws(Failure) {
        guard !window.isEmpty else { return }
        // SAFETY: zlib copies the dictionary during the call and keeps no pointer to it.
        let status = window.withUnsafeBufferPointer {
            inflateSetDictionary(stream, $0.baseAddress, uInt($0.count))
        }
        guard status == Z_OK else { throw Failure(message: "inflateSetDictionary failed (\(status))") }
    }

    /// Inflates from `input[start...]`, appending at most `limit` bytes (and at most 64 KiB) to `output`. With
    /// `stopAtBlocks` it stops at the next deflate block boundary too (Z_BLOCK), so the caller can take a seek point.
    package func inflate(_ input: [UInt8], from start: Int, into output: inout [UInt8], limit: Int,
                 stopAtBlocks: Bool = false) throws(Failure) -> Step {
        let available = input.count - start
        let room = min(limit, Self.scratchLength)
        var status: Int32 = Z_OK
        var produced = 0
        var consumed = 0
        // SAFETY: zlib reads `available` bytes of `input`, alive for the closure, and writes at most `room` bytes
        // into `scratch`, this object's own; both pointers are cleared before the closure ends.
        input.withUnsafeBufferPointer { inputBuffer in
            // SAFETY: zlib's next_in is not const, but inflate never writes through it.
            stream.pointee.next_in = UnsafeMutablePointer(mutating: inputBuffer.baseAddress.map { $0 + start })
            stream.pointee.avail_in = uInt(available)
            stream.pointee.next_out = scratch
            stream.pointee.avail_out = uInt(room)
            status = CZlib.inflate(stream, stopAtBlocks ? Z_BLOCK : Z_NO_FLUSH)
            consumed = available - Int(stream.pointee.avail_in)
            produced = room - Int(stream.pointee.avail_out)
            stream.pointee.next_in = nil
            stream.pointee.next_out = nil
        }
        // SAFETY: the first `produced` bytes of `scratch` were just written by zlib.
        output.append(contentsOf: UnsafeBufferPointer(start: scratch, count: produced))
        switch status {
        case Z_OK, Z_BUF_ERROR:  // Z_BUF_ERROR: no progress was possible (no input, or no room): not an error
            let dataType = stream.pointee.data_type
            let boundary = stopAtBlocks && dataType & 128 != 0 && dataType & 64 == 0
            return Step(consumed: consumed, streamEnded: false, atBlockBoundary: boundary,
                        pendingBits: Int(dataType & 7))
        case Z_STREAM_END:
            return Step(consumed: consumed, streamEnded: true, atBlockBoundary: false, pendingBits: 0)
        default:
            let message = stream.pointee.msg.map { String(cString: $0) } ?? "zlib error \(status)"
            throw Failure(message: message)
        }
    }

    /// zlib's CRC-32 (the zip and gzip checksum) of `bytes`, continuing from `initial`.
    package static func crc32(_ bytes: ArraySlice<UInt8>, initial: UInt32 = 0) -> UInt32 {
        // SAFETY: zlib reads the slice's bytes during the call only.
        bytes.withUnsafeBufferPointer {
            UInt32(CZlib.crc32(uLong(initial), $0.baseAddress, uInt($0.count)))
        }
    }
}
