package config

import (
	"reflect"
	"strings"
	"testing"
)

// Webhook settings load from the file and the environment, and Effective
// shows how many secrets a key has, never the secrets.
func TestWebhookSettings(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	path := writeFile(t, "webhooks:\n  allowHosts: [127.0.0.1, hooks.internal:8443]\n  publicUrl: https://outprint.example.com/\n"+
		"auth:\n  apiKeys:\n    - {user: a, tenant: t, sha256: "+KeyDigest("k")+", callbackUrl: 'https://hooks.example.com/x', webhookSecrets: ["+secret+"]}\n")
	c, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Webhooks.AllowHosts, []string{"127.0.0.1", "hooks.internal:8443"}; !reflect.DeepEqual(got, want) {
		t.Errorf("webhooks.allowHosts = %v, want %v", got, want)
	}
	if got, want := c.Webhooks.PublicURL, "https://outprint.example.com"; got != want {
		t.Errorf("webhooks.publicUrl = %q, want %q", got, want)
	}
	k := c.Auth.APIKeys[0]
	if k.CallbackURL != "https://hooks.example.com/x" || !reflect.DeepEqual(k.WebhookSecrets, []string{secret}) {
		t.Errorf("key = %+v, want its callback and secret", k)
	}
	eff := c.Effective()
	if strings.Contains(eff, secret) || !strings.Contains(eff, "webhookSecrets: 1 set") {
		t.Errorf("Effective() shows the secret or not its count:\n%s", eff)
	}

	c, err = Load(path, []string{"OUTPRINT_WEBHOOKS_ALLOW_HOSTS=a.example.com, b.example.com", "OUTPRINT_WEBHOOKS_PUBLIC_URL=http://127.0.0.1:8080"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Webhooks.AllowHosts, []string{"a.example.com", "b.example.com"}; !reflect.DeepEqual(got, want) {
		t.Errorf("OUTPRINT_WEBHOOKS_ALLOW_HOSTS: allowHosts = %v, want %v", got, want)
	}
	if got, want := c.Webhooks.PublicURL, "http://127.0.0.1:8080"; got != want {
		t.Errorf("OUTPRINT_WEBHOOKS_PUBLIC_URL: publicUrl = %q, want %q", got, want)
	}
}
