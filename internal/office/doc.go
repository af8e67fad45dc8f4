// Package office converts Office documents to PDF: DOCX, DOCM, DOC, ODT,
// RTF, XLSX, XLSM, XLS, ODS, CSV, PPTX, PPT and ODP.
//
// Detect recognises a document by its content and checks the bounds that
// need no LibreOffice (size, ZIP expansion, DTDs, encryption). A Pool
// keeps one warm LibreOffice (soffice --headless) per slot, each with its
// own user profile, driven over UNO by a small Python bridge (bridge.py,
// embedded in the binary and run with Debian's python3-uno), never by a
// shell command per document. Convert takes the first free process in
// FIFO order, converts in a scratch folder of its own under the caller's
// deadline, and kills and replaces the process's whole group on a
// timeout, a cancel or a crash, after Config.MaxConversions conversions
// or once it holds more than Config.MaxRSS.
//
// The walls: macros never run (macro security at its highest and macro
// execution disabled in the profile, NEVER_EXECUTE on load), links are
// never updated (the profile and UpdateDocMode NO_UPDATE), every process
// runs in new user and network namespaces where the kernel allows them
// (an empty loopback: no linked image, OLE link or external entity can be
// fetched), under the rlimits and nice value of TeX (internal/childproc).
package office
