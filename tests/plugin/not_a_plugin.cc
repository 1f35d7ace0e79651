// A shared library that is not a target plugin: it exports neither entry
// point, and kiln says so in one line.
extern "C" int some_function() { return 42; }
