import Glibc

/// Names users in messages: a uid alone means little to whoever reads it.
package enum UserAccounts {
    /// `uid N (NAME)`, or `uid N` when no account has it (`getpwuid_r`, safe on any thread).
    package static func describe(_ uid: uid_t) -> String {
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        // SAFETY: the entry's strings point into `buffer`, which outlives the copy made from them here.
        let name = buffer.withUnsafeMutableBufferPointer { storage -> String? in
            guard let base = storage.baseAddress, getpwuid_r(uid, &entry, base, storage.count, &found) == 0, found != nil,
                  let name = entry.pw_name else { return nil }
            return String(cString: name)
        }
        return "uid \(uid)" + (name.map { " (\($0))" } ?? "")
    }
}
