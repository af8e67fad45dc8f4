package service

import (
	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/fetch"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/metrics"
	"github.com/outprint/outprint/internal/webhook"
)

// WebhookPolicy checks the webhook settings of cfg (secrets, the keys'
// default callbacks against webhooks.allowHosts) and returns the policy
// acceptance and delivery share. New and `outprint config check` call it, so that a
// bad default callback stops startup with the setting named.
func WebhookPolicy(cfg *config.Config) (*webhook.Policy, error) {
	keys := make([]webhook.Key, len(cfg.Auth.APIKeys))
	for i, k := range cfg.Auth.APIKeys {
		keys[i] = webhook.Key{User: k.User, Tenant: k.Tenant, CallbackURL: k.CallbackURL, Secrets: k.WebhookSecrets}
	}
	return webhook.NewPolicy(webhook.PolicyConfig{AllowHosts: cfg.Webhooks.AllowHosts, Keys: keys})
}

// webhookDelivery returns the delivery settings of the job service: a
// Sender on its own SSRF-guarded client (https anywhere public, http and
// private addresses only for webhooks.allowHosts, no redirects). The
// caller closes the client's idle connections at exit.
func webhookDelivery(cfg *config.Config, policy *webhook.Policy, m *metrics.Metrics) (jobs.WebhookConfig, *fetch.Client, error) {
	fc := fetch.New(fetch.Config{
		AllowHosts:      cfg.Webhooks.AllowHosts,
		AnyHTTPS:        true,
		TrustAllowHosts: true,
		Setting:         "webhooks.allowHosts",
		Timeout:         webhook.DefaultTimeout,
		MaxBytes:        webhook.MaxResponse,
		MaxRedirects:    -1,
	})
	sender, err := webhook.NewSender(webhook.SenderConfig{Client: fc, Secrets: policy, Document: jobs.Document})
	if err != nil {
		return jobs.WebhookConfig{}, nil, err
	}
	return jobs.WebhookConfig{Sender: sender, Timeout: webhook.DefaultTimeout, Observer: m}, fc, nil
}
