@testable import RangeFSArchives
import Foundation
import RangeFSTestSupport
import XCTest

/// Replays the seeds and regressions of the archive fuzz targets (ArchiveZip, ArchiveTar, ArchiveISO) through the
/// property function their harnesses call (Tests/RangeFSTestSupport/ArchiveFuzzProperties.swift). The seeds are real
/// archives (zip(1)'s with a symlink, python's zip64, GNU and pax tars with long names, a .tar.gz, xorriso's ISO with
/// Rock Ridge and Joliet), so the properties are checked on indexes with members, not only on refusals.
final class FuzzArchiveRegressionTests: XCTestCase {
    private func inputs(of target: ArchiveFuzzTarget) throws -> [(name: String, bytes: [UInt8])] {
        let found = try FuzzInputs.all(of: target.rawValue)
        XCTAssertFalse(found.isEmpty, "no inputs kept for \(target)")
        return found
    }

    func testArchiveZipInputs() throws {
        for (name, bytes) in try inputs(of: .zip) {
            XCTAssertNil(archivePropertyBroken(bytes, .zip), name)
            if name.hasPrefix("seeds/") {
                XCTAssertGreaterThan(try ZipIndexReader(source: ByteArraySource(bytes), archive: name,
                                                        limits: ArchiveLimits()).index().members.count, 2, name)
            }
        }
    }

    func testArchiveTarInputs() throws {
        for (name, bytes) in try inputs(of: .tar) {
            XCTAssertNil(archivePropertyBroken(bytes, .tar), name)
        }
    }

    func testArchiveISOInputs() throws {
        for (name, bytes) in try inputs(of: .iso) {
            XCTAssertNil(archivePropertyBroken(bytes, .iso), name)
            if name.hasPrefix("seeds/") {
                XCTAssertGreaterThan(try ISO9660Reader(source: ByteArraySource(bytes), archive: name,
                                                       limits: ArchiveLimits()).index().members.count, 3, name)
            }
        }
    }
}
