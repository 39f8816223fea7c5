// Fuzz target: a JSON directory listing (nginx `autoindex_format json`, Caddy's browse) through
// DirectoryListing.parse, the same properties as ListingHTML; the listing read to records is the one the JSON was;
// and the fast reader ListingJSON against Foundation's JSONSerialization: where both read the bytes, they read the
// same strings and numbers ("read slowly, never wrongly").

import Foundation
@testable import RangeFSCatalog

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzListingJSON(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    checkListing(bytes)
    // Read to records (ListingJSON+Records.swift), the listing is the one the JSON was, and no problem either way.
    if let records = ListingJSON.records(bytes) {
        let fromJSON = DirectoryListing.parse(bytes, base: fuzzDirectory)
        let fromRecords = DirectoryListing.parse(records, base: fuzzDirectory)
        fuzzRequire(fromRecords == fromJSON, "read to records, the listing differs from the JSON's")
        fuzzRequire(DirectoryListing.problem(with: records, parsed: fromRecords) == nil
                        && DirectoryListing.problem(with: bytes, parsed: fromJSON) == nil, "read to records, a problem")
    }
    guard let fast = ListingJSON.objects(bytes),
          let slow = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [[String: Any]]  // not JSON: no verdict
    else { return 0 }
    fuzzRequire(fast.count == slow.count, "ListingJSON read \(fast.count) objects, Foundation \(slow.count)")
    for (object, reference) in zip(fast, slow) {
        for (key, value) in object.strings {
            let other = String(describing: reference[key])
            fuzzRequire(reference[key] as? String == value,
                        "string \(key): ListingJSON \(value.debugDescription), Foundation \(other)")
        }
        for (key, value) in object.numbers {
            guard let number = reference[key] as? NSNumber else {
                fuzzRequire(false, "number \(key): ListingJSON \(value), Foundation \(reference[key] ?? "none")")
                return 0
            }
            let expected = number.doubleValue
            fuzzRequire(expected == value || abs(expected - value) <= abs(expected) * 1e-15,
                        "number \(key): ListingJSON \(value), Foundation \(expected)")
        }
    }
    return 0
}
