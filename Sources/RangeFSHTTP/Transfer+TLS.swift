// The TLS settings of a transfer's easy handle, from the mount's options (--cacert, --capath, --insecure, --cert,
// --key).

import CCurl

extension Transfer {
    /// Sets the TLS options of `handle`: the CA certificates to trust, no verification, a client certificate.
    static func configureTLS(_ handle: UnsafeMutableRawPointer, _ options: HTTPOptions) {
        if let file = options.caCertificateFile { rfs_easy_setopt_string(handle, CURLOPT_CAINFO, file) }
        if let directory = options.caCertificateDirectory {
            rfs_easy_setopt_string(handle, CURLOPT_CAPATH, directory)
        }
        if options.insecure {
            rfs_easy_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 0)
            rfs_easy_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 0)
        }
        if let certificate = options.clientCertificate {
            rfs_easy_setopt_string(handle, CURLOPT_SSLCERT, certificate)
        }
        if let key = options.clientKey { rfs_easy_setopt_string(handle, CURLOPT_SSLKEY, key) }
    }
}
