// Default AddressSanitizer options for the sanitize preset, linked into every executable (see
// the top-level CMakeLists.txt); the ASAN_OPTIONS and LSAN_OPTIONS variables still override them.
//
// intercept_tls_get_addr=0: up to GCC 13 the runtime's __tls_get_addr interceptor takes a dynamic
// TLS block at offset 16 of a page for a glibc 2.19 block header (gone since glibc 2.25) and
// reads its "start" and "size" from the 16 bytes before it. Open MPI's plugins are dlopen'ed, so
// their thread-locals are such blocks, and now and then one lands at that offset: LeakSanitizer's
// tracer then scans a garbage range at exit and dies ("Tracer caught signal 11"), failing a rank
// that leaked nothing. Without the interceptor the blocks are still found through the heap.
extern "C" const char* __asan_default_options() { return "intercept_tls_get_addr=0"; }
