package config

import (
	"encoding/base64"
	"net/url"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Webhooks bounds where job callbacks go (issue 16).
type Webhooks struct {
	// AllowHosts are the hosts callbacks may reach over http and at
	// private or loopback addresses (default none: https to public
	// addresses only; OUTPRINT_WEBHOOKS_ALLOW_HOSTS, comma-separated), in
	// the syntax of images.allowHosts.
	AllowHosts []string
	// PublicURL is outprint's own URL as clients reach it, e.g.
	// https://outprint.example.com: the links of webhook bodies are made
	// absolute with it (default "": the scheme and Host of the request
	// that submitted the job; OUTPRINT_WEBHOOKS_PUBLIC_URL).
	PublicURL string
}

// keyWebhookFields are the optional webhook fields of an API key.
var keyWebhookFields = []string{"callbackUrl", "webhookSecrets"}

// maxKeySecrets is how many webhook secrets one key may list: the current
// one and the next while rotating.
const maxKeySecrets = 2

// keyWebhooks reads the optional webhook fields of one API key. Only the
// syntax is checked here; cmd checks the callback against
// webhooks.allowHosts with the same policy acceptance applies.
func (f *fileDecoder) keyWebhooks(got map[string]*yaml.Node, label string, k *APIKey) {
	if v, ok := got["callbackUrl"]; ok && !isNull(v) {
		f.keyCallback(v, label, k)
	}
	if v, ok := got["webhookSecrets"]; ok && !isNull(v) {
		f.keySecrets(v, label, k)
	}
}

// keyCallback reads an API key's callbackUrl.
func (f *fileDecoder) keyCallback(v *yaml.Node, label string, k *APIKey) {
	u, err := url.Parse(strings.TrimSpace(v.Value))
	switch {
	case v.Kind != yaml.ScalarNode:
		f.errorf(v, "%s.callbackUrl must be a single value (got %s)", label, describe(v))
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.Fragment != "":
		f.errorf(v, "%s.callbackUrl must be an https URL such as https://example.com/hooks/outprint, without user or fragment (got %q)", label, v.Value)
	default:
		k.CallbackURL = strings.TrimSpace(v.Value)
	}
}

// keySecrets reads an API key's webhookSecrets.
func (f *fileDecoder) keySecrets(v *yaml.Node, label string, k *APIKey) {
	if v.Kind != yaml.SequenceNode {
		f.errorf(v, "%s.webhookSecrets must be a list of whsec_… secrets (got %s)", label, describe(v))
		return
	}
	if len(v.Content) > maxKeySecrets {
		f.errorf(v, "%s.webhookSecrets lists %d secrets; at most %d are active at once (the current and the next)", label, len(v.Content), maxKeySecrets)
		return
	}
	for i, it := range v.Content {
		// Secrets are never echoed, not even in an error.
		if it.Kind != yaml.ScalarNode || isNull(it) {
			f.errorf(it, "%s.webhookSecrets[%d] must be a single value", label, i)
			continue
		}
		if reason := checkSecret(it.Value); reason != "" {
			f.errorf(it, "%s.webhookSecrets[%d] %s (got %d characters)", label, i, reason, len(it.Value))
			continue
		}
		k.WebhookSecrets = append(k.WebhookSecrets, it.Value)
	}
}

// checkSecret accepts "whsec_" + standard base64 of 24 to 64 bytes, as
// Standard Webhooks libraries take them.
func checkSecret(s string) string {
	const want = "must be whsec_ followed by the base64 of 24 to 64 random bytes, e.g. whsec_$(head -c 32 /dev/urandom | base64)"
	b64, ok := strings.CutPrefix(s, "whsec_")
	if !ok {
		return want
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(b) < 24 || len(b) > 64 {
		return want
	}
	return ""
}

// showKeyWebhooks adds a key's callback and the number of its secrets
// (never the secrets) to its Effective mapping.
func showKeyWebhooks(m *yaml.Node, k APIKey) {
	if k.CallbackURL != "" {
		m.Content = append(m.Content, strNode("callbackUrl"), strNode(k.CallbackURL))
	}
	if n := len(k.WebhookSecrets); n > 0 {
		m.Content = append(m.Content, strNode("webhookSecrets"), strNode(strconv.Itoa(n)+" set"))
	}
}

func parsePublicURL(v string) (string, string) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", ""
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return "", "must be an http or https URL such as https://outprint.example.com"
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "", "must be outprint's base URL, without user, query or fragment"
	}
	return strings.TrimRight(v, "/"), ""
}
