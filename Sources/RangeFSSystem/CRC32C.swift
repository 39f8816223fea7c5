// CRC32C (Castagnoli, the iSCSI/ext4 polynomial). Every block is checksummed when fetched and again when first
// served after a mount, so this sits on the hot path: the CPU's crc32 instruction (through the CChecksum shim)
// when there is one, else slicing-by-8 tables, eight bytes per step.

import CChecksum

/// CRC32C checksum, as stored per block and in every cache file's trailer.
package enum CRC32C {
    private static let polynomial: UInt32 = 0x82F6_3B78

    /// Eight 256-entry tables, stored one after another: table `n` starts at `n * 256`.
    private static let table: [UInt32] = {
        var table = Array(repeating: UInt32(0), count: 8 * 256)
        for byte in 0..<256 {
            var crc = UInt32(byte)
            for _ in 0..<8 { crc = (crc & 1) != 0 ? (crc >> 1) ^ polynomial : crc >> 1 }
            table[byte] = crc
        }
        for byte in 0..<256 {
            var crc = table[byte]
            for slice in 1..<8 {
                crc = table[Int(crc & 0xFF)] ^ (crc >> 8)
                table[slice * 256 + byte] = crc
            }
        }
        return table
    }()

    private static let hardwareAvailable = rfs_crc32c_hardware_available() != 0

    /// The checksum of `bytes`, continuing from `initial` (the result of an earlier call, or 0).
    package static func checksum(_ bytes: UnsafeRawBufferPointer, initial: UInt32 = 0) -> UInt32 {
        if hardwareAvailable {
            return rfs_crc32c_hardware(initial, bytes.baseAddress, bytes.count)
        }
        return tableChecksum(bytes, initial: initial)
    }

    /// The portable version, also used to check the hardware one.
    static func tableChecksum(_ bytes: UnsafeRawBufferPointer, initial: UInt32 = 0) -> UInt32 {
        var crc = ~initial
        // SAFETY: indices are a byte (0...255) into a 256-entry table, used only inside the closure.
        Self.table.withUnsafeBufferPointer { table in
            var index = 0
            let count = bytes.count
            while count - index >= 8 {
                let low = UInt32(bytes[index]) | UInt32(bytes[index + 1]) << 8
                    | UInt32(bytes[index + 2]) << 16 | UInt32(bytes[index + 3]) << 24
                let word = crc ^ low
                let high = UInt32(bytes[index + 4]) | UInt32(bytes[index + 5]) << 8
                    | UInt32(bytes[index + 6]) << 16 | UInt32(bytes[index + 7]) << 24
                crc = table[7 * 256 + Int(word & 0xFF)] ^ table[6 * 256 + Int((word >> 8) & 0xFF)]
                    ^ table[5 * 256 + Int((word >> 16) & 0xFF)] ^ table[4 * 256 + Int(word >> 24)]
                    ^ table[3 * 256 + Int(high & 0xFF)] ^ table[2 * 256 + Int((high >> 8) & 0xFF)]
                    ^ table[1 * 256 + Int((high >> 16) & 0xFF)] ^ table[0 * 256 + Int(high >> 24)]
                index += 8
            }
            while index < count {
                crc = table[Int((crc ^ UInt32(bytes[index])) & 0xFF)] ^ (crc >> 8)
                index += 1
            }
        }
        return ~crc
    }

    package static func checksum(_ bytes: some Collection<UInt8>, initial: UInt32 = 0) -> UInt32 {
        let array = Array(bytes)
        // SAFETY: the array is alive for the closure, which only reads it.
        return array.withUnsafeBytes { checksum($0, initial: initial) }
    }
}
