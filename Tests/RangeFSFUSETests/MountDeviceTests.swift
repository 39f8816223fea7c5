import Glibc
import XCTest
@testable import RangeFSFUSE

/// The mount's device numbers (for its readahead in sysfs) come from /proc/self/mountinfo, never from a stat of
/// the mount point, which a daemon would send to itself (FUSEMount.deviceNumbers).
final class MountDeviceTests: XCTestCase {
    func testTheRootsDeviceNumbersAreTheOnesItsStatShows() throws {
        var info = stat()
        XCTAssertEqual(stat("/", &info), 0)
        let device = UInt64(info.st_dev)
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~UInt64(0xfff))
        let minor = (device & 0xff) | ((device >> 12) & ~UInt64(0xff))
        let found = try XCTUnwrap(FUSEMount.deviceNumbers(of: "/"), "/ is not in /proc/self/mountinfo")
        XCTAssertEqual(found.major, major)
        XCTAssertEqual(found.minor, minor)
    }

    func testAFolderThatIsNoMountPointHasNone() {
        XCTAssertNil(FUSEMount.deviceNumbers(of: "/proc/self/no-such-mount-point"))
    }
}
