package diagram

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if d := sharedDrawer.d; d != nil {
		if err := d.Close(); err != nil {
			_, _ = os.Stderr.WriteString("shared drawer: Close: " + err.Error() + "\n")
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}
