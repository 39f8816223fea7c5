import Foundation

/// What the fuzzers keep (Tests/Fuzz/, `bench/fuzz.sh`): the seeds each target starts from and the inputs that once
/// broke a parser, by target, for the tests that replay them. One reader for all of them.
enum FuzzInputs {
    static let folder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz")

    /// The inputs kept for `target` in `kind` ("regressions" or "seeds"), by file name, sorted; nil when there is no
    /// such folder (a target without regressions has none).
    static func kept(_ kind: String, of target: String) throws -> [(name: String, bytes: [UInt8])]? {
        let directory = folder.appendingPathComponent(kind).appendingPathComponent(target)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return nil }
        return try names.sorted().map { ($0, Array(try Data(contentsOf: directory.appendingPathComponent($0)))) }
    }

    /// Every kept input of `target`, its regressions (where there are any) then its seeds, named `kind/file`.
    static func all(of target: String) throws -> [(name: String, bytes: [UInt8])] {
        var found: [(name: String, bytes: [UInt8])] = []
        for kind in ["regressions", "seeds"] {
            for (name, bytes) in try kept(kind, of: target) ?? [] { found.append(("\(kind)/\(name)", bytes)) }
        }
        return found
    }

    /// `count` copies of `bytes`, each with one byte replaced by one of `replacements`, named by where: the same
    /// changes at every run (positions and bytes from a fixed sequence), for the differential tests of the readers.
    static func oneByteChanges(of bytes: [UInt8], count: Int, replacements: [UInt8]) -> [(String, [UInt8])] {
        var state: UInt64 = 46
        return (0..<count).map { _ in
            state = state &* 6364136223846793005 &+ 1442695040888963407
            let at = Int((state >> 33) % UInt64(bytes.count))
            var changed = bytes
            changed[at] = replacements[Int((state >> 20) % UInt64(replacements.count))]
            return ("byte \(at) changed", changed)
        }
    }
}
