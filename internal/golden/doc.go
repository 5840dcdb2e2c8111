// Package golden is the tests' comparison with golden files: output
// checked byte for byte against a file under testdata, which the test
// rewrites when run with its -update flag. Each test package defines the
// flag and passes its value; Check does the rest. It holds no state and is
// safe for concurrent use by tests that write different files.
package golden
