package deps
import (
	_ "github.com/yuin/goldmark"
	_ "github.com/alecthomas/chroma/v2"
	_ "gopkg.in/yaml.v3"
	_ "golang.org/x/image/webp"
	_ "golang.org/x/sys/unix"
	_ "golang.org/x/text/unicode/norm"
	_ "github.com/prometheus/client_golang/prometheus"
)
