// Fuzz target: the cache's `catalog.json` (the saved set of mounted URLs, read at every mount: SavedFile) and
// `credentials.json` (OriginCredentials), as the mount reads them. The first input byte picks the file. Properties:
// what decodes is saved (with saveFiles' encoder) and read back the same; a saved URL's `user:password@` is split
// off completely (the URL kept has none left); a saved checksum that parses keeps its algorithm's length.

import Foundation
@testable import RangeFSCatalog
@testable import RangeFSFetch
@testable import RangeFSSystem

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSavedSet(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    guard let kind = bytes.first else { return 0 }
    let file = Data(bytes.dropFirst())
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]  // as CacheStore.saveFiles
    if kind % 2 == 0 {
        guard let saved = try? JSONDecoder().decode([SavedFile].self, from: file) else { return 0 }  // set aside
        guard let encoded = try? encoder.encode(saved) else {
            fuzzRequire(false, "a saved set that was read cannot be saved: \(saved)")
            return 0
        }
        fuzzRequire((try? JSONDecoder().decode([SavedFile].self, from: encoded)) == saved,
                    "saved set reads back differently")
        let credentials = CredentialTable()
        for file in saved {
            let adopted = credentials.adopt(file.url).url
            let again = URLOrigin.removingUserinfo(adopted)
            fuzzRequire(again.user == nil && again.url == adopted,
                        "\(adopted) still holds a user after adopting \(file.url)")
            if let checksum = file.checksum, let digest = ContentDigest(parsing: checksum) {
                fuzzRequire(digest.bytes.count == digest.algorithm.length, "checksum \(checksum)")
            }
        }
    } else {
        guard let table = try? JSONDecoder().decode([String: OriginCredentials].self, from: file) else { return 0 }
        guard let encoded = try? encoder.encode(table) else {
            fuzzRequire(false, "credentials that were read cannot be saved")
            return 0
        }
        fuzzRequire((try? JSONDecoder().decode([String: OriginCredentials].self, from: encoded)) == table,
                    "credentials read back differently")
        _ = CredentialTable(table).snapshot
    }
    return 0
}
